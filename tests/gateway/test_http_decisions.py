"""The HTTP API's pure decisions: which status and code a turn's failure answers with, and
which key a bearer token is."""

from __future__ import annotations

import pytest

from agent.errors import (
    BadRequest,
    ContextTooLong,
    HermesError,
    InvalidRecord,
    MessageTooLong,
    ProviderAuthError,
    ProviderUnavailable,
    RateLimited,
    SessionBusy,
    StoreCorrupt,
    StoreFull,
    StoreUnavailable,
    TurnLimitReached,
)
from gateway.http.failure_responses import error_for, outcome_error
from gateway.http.keys import ApiKey, match_key
from gateway.run import TurnOutcome


@pytest.mark.parametrize(
    ("exc", "status", "code", "retry_after"),
    [
        (SessionBusy("s", waited_s=1.0), 409, "session_busy", None),
        (StoreUnavailable("down"), 503, "store_unavailable", "5"),
        (StoreFull("full"), 503, "store_full", "30"),
        (StoreCorrupt("bad"), 503, "store_corrupt", None),
        (InvalidRecord("user_id", limit=10, got=11), 400, "invalid_record", None),
        (MessageTooLong(300, 100, why="gateway.max_message_chars"), 413, "message_too_long", None),
        (RateLimited("openai", "m", retry_after_s=2.5), 429, "rate_limited", "3"),
        (RateLimited("openai", "m"), 429, "rate_limited", None),
        (ContextTooLong("openai", "m"), 400, "context_length_exceeded", None),
        (ProviderAuthError("openai", "m", "key sk-abc refused"), 502, "auth", None),
        (BadRequest("openai", "m", "no"), 502, "bad_request", None),
        (ProviderUnavailable("openai", "m", "503", retry_after_s=4), 502, "unavailable", "4"),
        (TurnLimitReached("s", steps=25), 422, "turn_limit_reached", None),
        (HermesError("odd"), 500, "internal_error", None),
    ],
)
def test_each_failure_has_its_status_and_code(
    exc: HermesError, status: int, code: str, retry_after: str | None
) -> None:
    error = error_for(exc)
    assert (error.status, error.code) == (status, code)
    assert error.headers.get("Retry-After") == retry_after
    assert "sk-abc" not in error.message  # a provider's auth detail is not passed on


def test_outcomes_that_are_replies_are_not_refusals() -> None:
    assert outcome_error(TurnOutcome(reply="hi", session_id="s")) is None
    assert outcome_error(TurnOutcome(reply="", session_id="s", kind="interrupted")) is None
    busy = outcome_error(TurnOutcome(reply="busy", session_id="s", busy=True, kind="failed"))
    assert busy is not None and busy.status == 409
    unknown = outcome_error(TurnOutcome(reply="⚠️ x", session_id="s", kind="failed"))
    assert unknown is not None and unknown.status == 500 and "⚠️" not in unknown.message


def test_a_token_matches_its_key_by_name_only_with_the_bearer_scheme() -> None:
    keys = (ApiKey("default", b"k1"), ApiKey("alice", b"k2"))
    assert match_key(keys, "Bearer k2") == "alice"
    assert match_key(keys, "Bearer k1") == "default"
    assert match_key(keys, "k1") is None
    assert match_key(keys, "Bearer k3") is None
    assert match_key(keys, "Bearer \udcff") is None  # an undecodable header byte is no crash
    assert "k2" not in repr(keys)
