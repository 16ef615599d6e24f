"""Session hygiene: the gateway's safety net that compacts a session at 85% of the window.

It runs before the agent, for sessions that grew between turns (overnight chats, a switch to a
smaller model). The decision is pure; `run_hygiene` is the thin shell around one compaction.
Failures back off 5, 15, then 45 minutes, kept in the store so a restart does not reset them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from agent.errors import CompactionRefused, HermesError

__all__ = [
    "BACKOFF_S",
    "HYGIENE_RATIO",
    "MIN_HISTORY",
    "HygieneDecision",
    "HygieneOutcome",
    "decide_hygiene",
    "next_backoff_until",
    "run_hygiene",
]

log = structlog.get_logger(__name__)

HYGIENE_RATIO = 0.85
"""Fixed, not tied to compression.threshold: at 50% it compacted every turn of long sessions."""
MIN_HISTORY = 4
"""Messages besides the system prompt; shorter sessions have nothing worth compacting."""
BACKOFF_S = (300.0, 900.0, 2700.0)
DEFAULT_TIMEOUT_S = 45.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HygieneDecision:
    run: bool
    tokens: int
    source: Literal["api", "estimate"]
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HygieneOutcome:
    decision: HygieneDecision
    compacted: bool = False
    error: str | None = None


def decide_hygiene(
    *,
    api_tokens: int | None,
    estimated_tokens: int,
    context_length: int,
    history_len: int,
    enabled: bool,
    backoff_until: float | None,
    now: float,
) -> HygieneDecision:
    """Whether to compact before the turn: real API tokens first, the rough estimate second."""
    source: Literal["api", "estimate"] = "api" if api_tokens else "estimate"
    tokens = api_tokens if api_tokens else estimated_tokens
    limit = int(context_length * HYGIENE_RATIO)

    def no(reason: str) -> HygieneDecision:
        return HygieneDecision(run=False, tokens=tokens, source=source, reason=reason)

    if not enabled:
        return no("compression disabled")
    if history_len < MIN_HISTORY:
        return no(f"history has {history_len} messages, fewer than {MIN_HISTORY}")
    if tokens < limit:
        return no(f"{tokens} tokens is below {limit} (85% of {context_length})")
    if backoff_until is not None and now < backoff_until:
        return no(f"backing off for {backoff_until - now:.0f} s after failures")
    return HygieneDecision(
        run=True, tokens=tokens, source=source, reason=f"{tokens} tokens >= {limit} ({source})"
    )


def next_backoff_until(failures: int, now: float) -> float:
    """After the n-th consecutive failure (n >= 1): 5, 15, then 45 minutes."""
    return now + BACKOFF_S[min(max(failures, 1), len(BACKOFF_S)) - 1]


async def run_hygiene(
    agent: Any,
    store: Any,
    *,
    api_tokens: int | None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    clock: Callable[[], float] = time.time,
) -> HygieneOutcome:
    """Compact `agent`'s session through its context engine when the decision says so.

    Never raises: a failure is counted and backed off, and the user's turn runs either way.
    """
    facts: dict[str, Any] = dict(
        api_tokens=api_tokens,
        estimated_tokens=_estimate(agent),
        context_length=agent.engine.context_length,
        history_len=sum(1 for m in agent.transcript if m.get("role") != "system"),
        enabled=agent.deps.config.compression.enabled,
    )
    decision = decide_hygiene(**facts, backoff_until=None, now=clock())
    if not decision.run:  # the common case: no store round trip
        return HygieneOutcome(decision=decision)
    meta = await store.get_meta(agent.session_id)
    decision = decide_hygiene(**facts, backoff_until=meta.get("hygiene_backoff_until"), now=clock())
    if not decision.run:
        log.info("hygiene_backed_off", session_id=agent.session_id, reason=decision.reason)
        return HygieneOutcome(decision=decision)
    try:
        async with asyncio.timeout(timeout_s):
            await agent.compress(reason="hygiene")
    except (CompactionRefused, HermesError, TimeoutError) as exc:
        error = str(getattr(exc, "reason", None) or type(exc).__name__)
        await _record_failure(agent.session_id, store, meta, clock(), error)
        return HygieneOutcome(decision=decision, error=error)
    if meta.get("hygiene_failures"):
        await store.update_meta(agent.session_id, hygiene_failures=None, hygiene_backoff_until=None)
    log.info(
        "hygiene_compacted",
        session_id=agent.session_id,
        tokens=decision.tokens,
        source=decision.source,
    )
    return HygieneOutcome(decision=decision, compacted=True)


async def _record_failure(
    session_id: str, store: Any, meta: dict[str, Any], now: float, error: str
) -> None:
    failures = int(meta.get("hygiene_failures", 0)) + 1
    until = next_backoff_until(failures, now)
    await store.update_meta(session_id, hygiene_failures=failures, hygiene_backoff_until=until)
    log.warning(
        "hygiene_failed",
        session_id=session_id,
        failures=failures,
        backoff_s=round(until - now),
        error=error,
    )


def _estimate(agent: Any) -> int:
    """The engine's estimate, calibrated per model from real usage (chars/4 under-counts
    non-Latin text by a third or more); the plain rough estimate for engines without one."""
    current = getattr(agent.engine, "current_tokens", None)
    if callable(current):
        return int(current(agent.transcript))
    from agent.tokens import estimate_messages_tokens_rough

    return estimate_messages_tokens_rough(agent.transcript)
