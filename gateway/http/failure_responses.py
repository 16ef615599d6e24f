"""What a turn's failure answers over HTTP: a status and the OpenAI error envelope, decided by a
pure function of the outcome, so no failure ever reaches a client as a 200 with a warning.

| failure | status | `code` |
|---|---|---|
| session busy past the lock's wait | 409 | `session_busy` |
| the store cannot serve (down, disk full, damaged) | 503 + Retry-After | `store_unavailable`, `store_full`, `store_corrupt` |
| input the store cannot keep (too long for a column) | 400 | `invalid_record` |
| a message over `gateway.max_message_chars` or half the window | 413 | `message_too_long` |
| the provider rate-limits | 429 (+ Retry-After when it said) | `rate_limited` |
| the prompt exceeds the window even after compaction | 400 | `context_length_exceeded` |
| any other provider failure | 502 | the provider's kind: `auth`, `bad_request`, `unavailable` |
| the turn used its whole step budget | 422 | `turn_limit_reached` |
| anything else | 500 | `internal_error` (the log has the detail) |
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, assert_never

from agent.errors import (
    BadRequest,
    ContextTooLong,
    HermesError,
    InvalidRecord,
    MessageTooLong,
    ProviderAuthError,
    ProviderError,
    RateLimited,
    SessionBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreUnavailable,
    TurnLimitReached,
)
from agent.providers._error_kinds import ErrorKind
from gateway.http.error_envelope import ApiError

if TYPE_CHECKING:
    from gateway.run import TurnOutcome

__all__ = ["outcome_error", "provider_kind", "retry_after_header"]

MAX_DETAIL_CHARS = 300


def outcome_error(outcome: TurnOutcome) -> ApiError | None:
    """The refusal `outcome` answers with, or None when it is a reply."""
    if outcome.busy:
        return _busy()
    if outcome.kind not in ("failed", "error"):
        return None
    if outcome.error is None:
        return ApiError(
            500,
            "the server failed on this request; its log has the details",
            "server_error",
            code="internal_error",
        )
    return error_for(outcome.error)


def error_for(exc: HermesError) -> ApiError:
    """The HTTP answer for one of the runtime's errors."""
    if isinstance(exc, SessionBusy):
        return _busy()
    if isinstance(exc, StoreError):
        return _store_error(exc)
    if isinstance(exc, ProviderError):
        return _provider_error(exc)
    if isinstance(exc, MessageTooLong):
        return ApiError(413, str(exc), param="messages", code="message_too_long")
    if isinstance(exc, TurnLimitReached):
        return ApiError(
            422,
            f"the assistant stopped after {exc.steps} model calls without a final answer; "
            "ask for less at once, or raise agent.max_iterations",
            "invalid_request_error",
            code="turn_limit_reached",
        )
    return ApiError(500, _cut(str(exc)), "server_error", code="internal_error")


def provider_kind(exc: ProviderError) -> ErrorKind:
    """The kind of a provider failure, as `agent.providers._error_kinds` sorts them."""
    if isinstance(exc, ProviderAuthError):
        return "auth"
    if isinstance(exc, RateLimited):
        return "rate_limited"
    if isinstance(exc, ContextTooLong):
        return "context_too_long"
    if isinstance(exc, BadRequest):
        return "bad_request"
    return "unavailable"


def retry_after_header(seconds: float | None) -> dict[str, str]:
    """`Retry-After` in whole seconds (RFC 9110 §10.2.3), or nothing when unknown."""
    if seconds is None:
        return {}
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def _busy() -> ApiError:
    return ApiError(
        409,
        "this session is busy with another request; send yours again once that one is answered",
        "conflict_error",
        code="session_busy",
    )


def _store_error(exc: StoreError) -> ApiError:
    if isinstance(exc, InvalidRecord):
        return ApiError(400, str(exc), param=exc.field, code="invalid_record")
    if isinstance(exc, StoreFull):
        message, code = "the server's disk is full; try again later", "store_full"
    elif isinstance(exc, StoreCorrupt):
        message, code = (
            "the server's session store is damaged; the operator must recover it",
            ("store_corrupt"),
        )
    else:
        message, code = "the session store is unavailable; try again shortly", "store_unavailable"
    retry = exc.retry_after_s if isinstance(exc, StoreUnavailable) else None
    return ApiError(
        503, message, "service_unavailable", code=code, headers=retry_after_header(retry)
    )


def _provider_error(exc: ProviderError) -> ApiError:
    kind = provider_kind(exc)
    match kind:
        case "rate_limited":
            retry = exc.retry_after_s if isinstance(exc, RateLimited) else None
            return ApiError(
                429,
                "the model provider is rate limiting this server; retry later",
                "rate_limit_error",
                code=kind,
                headers=retry_after_header(retry),
            )
        case "context_too_long":
            return ApiError(
                400,
                "the conversation is longer than the model's window even after compaction",
                param="messages",
                code="context_length_exceeded",
            )
        case "auth":
            message = "the model provider refused this server's credentials (an operator fix)"
        case "bad_request" | "unavailable":
            what = "rejected the request" if kind == "bad_request" else "is unavailable"
            detail = f": {_cut(exc.detail)}" if exc.detail else ""
            message = f"the model provider ({exc.provider}) {what}{detail}"
        case unreachable:
            assert_never(unreachable)
    retry = getattr(exc, "retry_after_s", None)
    return ApiError(502, message, "upstream_error", code=kind, headers=retry_after_header(retry))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"
