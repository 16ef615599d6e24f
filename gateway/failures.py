"""What a person in a chat is told when their message could not be served: one short
sentence, no paths or internals (the log has the detail, and the HTTP API maps the same
exceptions to statuses)."""

from __future__ import annotations

from agent.errors import (
    MessageTooLong,
    SessionBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreUnavailable,
)

__all__ = ["BUSY_REPLY", "failure_sentence"]

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
