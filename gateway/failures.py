"""What a person in a chat is told when their message could not be served: one short
sentence, no paths or internals (the log has the detail). The one place failures become reply
text: `turn_failure_sentence` for a turn the model side ended, `failure_sentence` for the rest.
(The HTTP API answers the same exceptions with statuses: `gateway.http.failure_responses`.)"""

from __future__ import annotations

from typing import TypeAlias, assert_never

from agent.errors import (
    MediaRefused,
    MessageTooLong,
    ProviderError,
    SessionBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreUnavailable,
    TurnLimitReached,
    TurnRefused,
)

__all__ = ["BUSY_REPLY", "TurnFailure", "failure_sentence", "turn_failure_sentence"]

TurnFailure: TypeAlias = ProviderError | TurnLimitReached | TurnRefused | MediaRefused
"""How a turn ends without an answer while the session stays as it should (`AIAgent.run_turn`)."""

BUSY_REPLY = "⚠️ This conversation is still busy with another message; please send yours again."
NOT_SAVED = "your message was not saved"


def failure_sentence(exc: Exception) -> str:
    """The reply for a message that failed outside the model (the runner reports provider
    failures itself, with the provider's own sentence)."""
    if isinstance(exc, SessionBusy):
        return BUSY_REPLY
    if isinstance(exc, MessageTooLong):
        return f"⚠️ {str(exc)[0].upper()}{str(exc)[1:]}."
    if isinstance(exc, StoreFull):
        return f"⚠️ The assistant's disk is full, so {NOT_SAVED}; please try again later."
    if isinstance(exc, StoreCorrupt):
        return f"⚠️ The assistant's storage needs repair, so {NOT_SAVED}; the operator can see why."
    if isinstance(exc, StoreUnavailable):
        return f"⚠️ The assistant's storage is not reachable, so {NOT_SAVED}; try again in a moment."
    if isinstance(exc, StoreError):
        return f"⚠️ The assistant could not save that, so {NOT_SAVED}."
    return f"⚠️ Something went wrong: {type(exc).__name__}."


def turn_failure_sentence(exc: TurnFailure) -> str:
    """The reply for a turn that ended without an answer: the provider's own sentence, the
    step limit, or why the new messages cannot continue the session."""
    match exc:
        case TurnLimitReached(steps=steps):
            return f"⚠️ I stopped after {steps} model calls without a final answer."
        case ProviderError() | TurnRefused() | MediaRefused():
            return f"⚠️ {exc}"
        case unreachable:
            assert_never(unreachable)
