"""Bounded retries with jittered exponential backoff for transient provider failures."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from agent.errors import (
    ProviderError,
    ProviderSilent,
    ProviderUnavailable,
    RateLimited,
    ReplyCut,
)
from agent.providers.base import OnText, ProviderReply

__all__ = [
    "complete_once_shown",
    "BASE_DELAY_S",
    "MAX_CUT_RETRIES",
    "MAX_DELAY_S",
    "MAX_RETRY_AFTER_S",
    "backoff_delay_s",
    "call_with_retries",
    "retry_after_of",
]

T = TypeVar("T")

BASE_DELAY_S = 0.5
"""The first backoff step; each further attempt doubles it."""
MAX_DELAY_S = 20.0
"""No computed backoff waits longer than this."""
MAX_RETRY_AFTER_S = 60.0
"""A server asking for a longer pause than this is not waited for: the error goes to the caller."""

MAX_CUT_RETRIES = 1
"""A reply cut short (or unreadable), or a stream gone silent, is retried at most this often."""

log = structlog.get_logger(__name__)


def backoff_delay_s(
    attempt: int,
    retry_after_s: float | None = None,
    *,
    rng: Callable[[], float] = random.random,
    base_s: float = BASE_DELAY_S,
    cap_s: float = MAX_DELAY_S,
) -> float:
    """Seconds to wait before retry number `attempt` (0-based).

    The server's `retry_after_s` wins when given (never below it); otherwise the delay is
    ``min(cap, base * 2**attempt)`` scaled by a jitter factor in [0.5, 1.0).
    """
    if retry_after_s is not None and retry_after_s >= 0:
        return retry_after_s
    ceiling = min(cap_s, base_s * 2.0 ** max(attempt, 0))
    return ceiling * (0.5 + rng() / 2)


def retry_after_of(exc: BaseException) -> float | None:
    """The server-requested pause carried by a provider error, if any."""
    value = getattr(exc, "retry_after_s", None)
    return float(value) if isinstance(value, int | float) else None


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: Callable[[], float] = random.random,
    can_retry: Callable[[], bool] = lambda: True,
) -> T:
    """Await `fn()`, retrying ProviderUnavailable and RateLimited up to `max_retries` times.

    `can_retry` is asked before each retry (a stream that already showed text must not be
    replayed). Any other error, or the last transient one, goes to the caller unchanged.
    """
    attempt = 0
    while True:
        try:
            return await fn()
        except (ProviderUnavailable, RateLimited) as exc:
            delay_s = _next_delay_s(exc, attempt, max_retries, rng, can_retry)
            if delay_s is None:
                raise
            log.warning(
                "provider_call_retried",
                provider=exc.provider,
                model=exc.model,
                error=type(exc).__name__,
                attempt=attempt + 1,
                max_retries=max_retries,
                delay_s=round(delay_s, 3),
                why=exc.detail,
            )
            await sleep(delay_s)
            attempt += 1


def _next_delay_s(
    exc: ProviderError,
    attempt: int,
    max_retries: int,
    rng: Callable[[], float],
    can_retry: Callable[[], bool],
) -> float | None:
    """The pause before the next attempt, or None when the error should go to the caller."""
    if attempt >= max_retries or not can_retry():
        return None
    if isinstance(exc, ReplyCut | ProviderSilent) and attempt >= MAX_CUT_RETRIES:
        return None  # a server that cuts (or stalls) twice will again: fail with what arrived
    retry_after_s = retry_after_of(exc)
    if retry_after_s is not None and retry_after_s > MAX_RETRY_AFTER_S:
        return None
    return backoff_delay_s(attempt, retry_after_s, rng=rng)


async def complete_once_shown(
    create: Callable[[], Awaitable[ProviderReply]],
    stream: Callable[[OnText], Awaitable[ProviderReply]],
    *,
    on_text: OnText | None,
    max_retries: int,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    stream_always: bool = False,
) -> ProviderReply:
    """One model call with bounded retries, streamed when `on_text` is given (or always).

    Once any streamed text reached the user, a failure is not retried: they would see it twice.
    """
    shown = False

    async def forward(delta: str) -> None:
        nonlocal shown
        if on_text is not None:
            shown = True
            await on_text(delta)

    async def attempt() -> ProviderReply:
        if on_text is None and not stream_always:
            return await create()
        return await stream(forward)

    reply = await call_with_retries(
        attempt, max_retries=max_retries, sleep=sleep, can_retry=lambda: not shown
    )
    log.debug(
        "provider_replied",
        model=reply.model,
        stop_reason=reply.stop_reason,
        input_tokens=reply.usage.input_tokens,
        cache_read_tokens=reply.usage.cache_read_tokens,
        cache_write_tokens=reply.usage.cache_write_tokens,
    )
    return reply
