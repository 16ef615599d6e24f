"""What a person in a chat reads when their message was not answered: one module decides it.

Real exception values of `agent.errors`, as the runner catches them; the sentences are the
replies the runner sends (`GatewayRunner._turn` for a turn the model side ended,
`GatewayRunner._failed` for the rest).
"""

from __future__ import annotations

import pytest

from agent.errors import (
    ProviderUnavailable,
    SessionBusy,
    StoreFull,
    TurnLimitReached,
    TurnRefused,
)
from gateway.failures import BUSY_REPLY, failure_sentence, turn_failure_sentence


def test_a_turn_that_ran_out_of_steps_says_how_many_and_nothing_internal() -> None:
    """The step limit is told in the user's terms; the session id stays in the log."""
    reply = turn_failure_sentence(TurnLimitReached("sess-7f3a", steps=12))
    assert reply == "⚠️ I stopped after 12 model calls without a final answer."
    assert "sess-7f3a" not in reply


@pytest.mark.parametrize(
    "exc",
    [
        ProviderUnavailable("anthropic", "claude-x", "overloaded"),
        TurnRefused("messages[1] answers a tool call nobody made", index=1, field="tool_call_id"),
    ],
    ids=["provider", "refused"],
)
def test_a_provider_failure_or_a_refusal_is_its_own_sentence(exc: Exception) -> None:
    """The provider's sentence (which names the provider and what to check) and a refusal's
    reason reach the person as they are."""
    assert isinstance(exc, ProviderUnavailable | TurnRefused)
    assert turn_failure_sentence(exc) == f"⚠️ {exc}"


def test_failures_outside_the_model_keep_their_sentences() -> None:
    """A busy session, a full disk and an unexpected failure: each has its reply, and an
    unexpected one names only its kind."""
    assert failure_sentence(SessionBusy("session:s1", waited_s=2.0)) == BUSY_REPLY
    assert "disk is full" in failure_sentence(StoreFull("disk full"))
    unexpected = failure_sentence(RuntimeError("/home/me/secret/path broke"))
    assert unexpected == "⚠️ Something went wrong: RuntimeError."
