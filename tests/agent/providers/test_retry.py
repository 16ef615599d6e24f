"""Error classification and bounded retries: pure tables and a scripted call, no network."""

from __future__ import annotations

import pytest

from agent.errors import BadRequest, ProviderAuthError, ProviderUnavailable, RateLimited
from agent.providers._error_kinds import (
    build_error,
    classify_status,
    describe_failure,
    retry_after_from_headers,
)
from agent.providers.retry import MAX_RETRY_AFTER_S, backoff_delay_s, call_with_retries


@pytest.mark.parametrize(
    ("status", "message", "error_type", "code", "expected"),
    [
        (401, "invalid x-api-key", None, None, "auth"),
        (403, "forbidden", None, None, "auth"),
        (429, "slow down", None, None, "rate_limited"),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", None, None, "context_too_long"),
        (
            400,
            "This model's maximum context length is 128000 tokens",
            None,
            None,
            "context_too_long",
        ),
        (400, "bad", None, "context_length_exceeded", "context_too_long"),
        (413, "Request Entity Too Large", None, None, "context_too_long"),
        (400, "messages: roles must alternate", None, None, "bad_request"),
        (404, "model not found", None, None, "bad_request"),
        (500, "boom", None, None, "unavailable"),
        (529, "Overloaded", "overloaded_error", None, "unavailable"),
        (503, "unavailable", None, None, "unavailable"),
        (400, "busy", "overloaded_error", None, "unavailable"),
    ],
)
def test_classify_status(
    status: int, message: str, error_type: str | None, code: str | None, expected: str
) -> None:
    """Each HTTP failure lands in the error kind the runtime acts on."""
    assert classify_status(status, message, error_type=error_type, code=code) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After-Ms": "10", "retry-after": "5"}, 0.01),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "Thu, 01 Jan 1970 00:00:30 GMT"}, 20.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_from_headers(headers: dict[str, str], expected: float | None) -> None:
    """retry-after-ms wins over retry-after, which may be seconds or an HTTP date."""
    assert retry_after_from_headers(headers, now=lambda: 10.0) == expected


def test_describe_failure_hides_the_key_and_trims() -> None:
    """An error detail never contains the API key and stays short."""
    detail = describe_failure(
        401, "Incorrect API key provided: sk-secret-123 " + "x" * 500, secret="sk-secret-123"
    )
    assert "sk-secret-123" not in detail
    assert detail.startswith("HTTP 401: Incorrect API key provided: ***")
    assert len(detail) < 320


@pytest.mark.parametrize(
    ("attempt", "retry_after", "rand", "expected"),
    [
        (0, None, 0.0, 0.25),
        (0, None, 0.999999, 0.5),
        (2, None, 0.0, 1.0),
        (10, None, 0.0, 10.0),
        (3, 0.01, 0.5, 0.01),
        (0, 7.0, 0.9, 7.0),
    ],
)
def test_backoff_delay_s(
    attempt: int, retry_after: float | None, rand: float, expected: float
) -> None:
    """Backoff doubles per attempt with jitter, is capped, and honours the server's retry-after."""
    assert backoff_delay_s(attempt, retry_after, rng=lambda: rand) == pytest.approx(
        expected, abs=1e-4
    )


class _Script:
    def __init__(self, *outcomes: Exception | str) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0
        self.slept: list[float] = []

    async def __call__(self) -> str:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def sleep(self, delay_s: float) -> None:
        self.slept.append(delay_s)


async def test_transient_errors_are_retried_then_succeed() -> None:
    """A 429 with retry-after and an outage are retried; the server's pause is honoured."""
    script = _Script(RateLimited("p", "m", retry_after_s=0.3), ProviderUnavailable("p", "m"), "ok")
    result = await call_with_retries(script, max_retries=3, sleep=script.sleep, rng=lambda: 0.0)
    assert result == "ok"
    assert script.slept == [0.3, 0.5]


async def test_retries_are_bounded() -> None:
    """After max_retries transient failures the last error reaches the caller."""
    script = _Script(*[ProviderUnavailable("p", "m", f"n{i}") for i in range(5)])
    with pytest.raises(ProviderUnavailable, match="n2"):
        await call_with_retries(script, max_retries=2, sleep=script.sleep)
    assert script.calls == 3


@pytest.mark.parametrize(
    "error",
    [
        ProviderAuthError("p", "m"),
        BadRequest("p", "m"),
        RateLimited("p", "m", retry_after_s=MAX_RETRY_AFTER_S + 1),
    ],
)
async def test_non_transient_errors_are_not_retried(error: Exception) -> None:
    """Auth and request errors, and rate limits asking for a very long pause, are not retried."""
    script = _Script(error, "never")
    with pytest.raises(type(error)):
        await call_with_retries(script, max_retries=3, sleep=script.sleep)
    assert script.calls == 1


async def test_can_retry_false_stops_retrying() -> None:
    """When the caller says a retry is unsafe (text already shown), the error goes up at once."""
    script = _Script(ProviderUnavailable("p", "m"), "never")
    with pytest.raises(ProviderUnavailable):
        await call_with_retries(script, max_retries=3, sleep=script.sleep, can_retry=lambda: False)
    assert script.calls == 1


def test_build_error_carries_retry_after_for_outages() -> None:
    """A 5xx with retry-after keeps the pause so the retry loop can honour it."""
    error = build_error("unavailable", "p", "m", "HTTP 503", retry_after_s=0.01)
    assert isinstance(error, ProviderUnavailable)
    assert getattr(error, "retry_after_s", None) == 0.01
