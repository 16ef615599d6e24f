"""Sort a provider's HTTP failure into an error kind: pure functions shared by every adapter."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Literal, TypeAlias, assert_never

from agent.errors import (
    BadRequest,
    ContextTooLong,
    ProviderAuthError,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
)
from agent.providers.overflow import Overflow, parse_overflow

__all__ = [
    "ErrorKind",
    "HTTPFailure",
    "build_error",
    "classify_status",
    "describe_failure",
    "error_from_status",
    "is_context_too_long",
    "retry_after_from_headers",
]

ErrorKind: TypeAlias = Literal[
    "auth", "rate_limited", "context_too_long", "bad_request", "unavailable"
]

MAX_DETAIL_CHARS = 300

_CONTEXT_PATTERNS = re.compile(
    r"prompt is too long|context[ _]length|maximum context|context window|too many tokens"
    r"|input is too long|exceeds the (?:available )?context|reduce the length|request too large"
    r"|request entity too large|too large for model",
    re.IGNORECASE,
)
_UNAVAILABLE_TYPES = frozenset({"overloaded_error", "api_error", "server_error", "timeout_error"})


def is_context_too_long(message: str, code: str | None = None) -> bool:
    """True when an error's message or code says the prompt does not fit the model's window."""
    if code and code in ("context_length_exceeded", "request_too_large", "string_above_max_length"):
        return True
    return bool(_CONTEXT_PATTERNS.search(message))


def classify_status(
    status: int, message: str, *, error_type: str | None = None, code: str | None = None
) -> ErrorKind:
    """The kind of an HTTP error response, from its status, message and the API's error type."""
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    if status >= 500 or status in (408, 409) or error_type in _UNAVAILABLE_TYPES:
        return "unavailable"
    if status in (400, 413) and is_context_too_long(message, code):
        return "context_too_long"
    return "bad_request"


def retry_after_from_headers(
    headers: Mapping[str, str], *, now: Callable[[], float] = time.time
) -> float | None:
    """Seconds to wait from `retry-after-ms`, else `retry-after` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = _as_float(lowered.get("retry-after-ms"))
    if millis is not None and millis >= 0:
        return millis / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _as_float(raw)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - now(), 0.0)


def describe_failure(status: int | None, message: str, *, secret: str | None) -> str:
    """A short detail for the error: status and the API's message, trimmed, never the key."""
    text = " ".join(message.split())
    if secret:
        text = text.replace(secret, "***")
    if len(text) > MAX_DETAIL_CHARS:
        text = text[: MAX_DETAIL_CHARS - 1] + "…"
    return f"HTTP {status}: {text}" if status is not None else text


def build_error(
    kind: ErrorKind,
    provider: str,
    model: str,
    detail: str,
    *,
    retry_after_s: float | None = None,
    overflow: Overflow | None = None,
) -> ProviderError:
    """The `agent.errors` exception for `kind`; a 5xx may carry `retry-after` too, a context
    overflow the window and prompt size the server named."""
    match kind:
        case "auth":
            return ProviderAuthError(provider, model, detail)
        case "rate_limited":
            return RateLimited(provider, model, detail, retry_after_s=retry_after_s)
        case "context_too_long":
            sizes = overflow or Overflow()
            return ContextTooLong(
                provider,
                model,
                detail,
                window_tokens=sizes.window_tokens,
                prompt_tokens=sizes.prompt_tokens,
            )
        case "bad_request":
            return BadRequest(provider, model, detail)
        case "unavailable":
            return ProviderUnavailable(provider, model, detail, retry_after_s=retry_after_s)
        case unreachable:
            assert_never(unreachable)


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPFailure:
    """An SDK's HTTP status error, read into plain values; the SDKs differ only in the reading."""

    status: int
    message: str
    """The API's own error message (from the body when it has one)."""
    error_type: str | None = None
    """The envelope's `type`, e.g. `overloaded_error` or `invalid_request_error`."""
    code: str | None = None
    """OpenAI's machine-readable `code`, e.g. `context_length_exceeded`."""
    param: str | None = None
    """The request field the error is about (OpenAI), e.g. `context_management`."""
    headers: Mapping[str, str]
    """The response headers: `retry-after-ms` and `retry-after` live here."""


def error_from_status(
    failure: HTTPFailure, *, provider: str, model: str, secret: str | None
) -> ProviderError:
    """The `agent.errors` exception for an HTTP failure: kind, server pause and a safe detail."""
    kind = classify_status(
        failure.status, failure.message, error_type=failure.error_type, code=failure.code
    )
    detail = describe_failure(failure.status, failure.message, secret=secret)
    retry_after_s = retry_after_from_headers(failure.headers)
    overflow = parse_overflow(failure.message) if kind == "context_too_long" else None
    return build_error(
        kind, provider, model, detail, retry_after_s=retry_after_s, overflow=overflow
    )


def _as_float(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None
