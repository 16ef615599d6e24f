"""Session hygiene: the gateway's safety net that compacts a session at 85% of the window.

It runs before the agent, for sessions that grew between turns (overnight chats, a switch to a
smaller model). The decision is pure; `run_hygiene` is the thin shell around one compaction,
made the way a turn makes room (`AIAgent.make_room`): background work is stopped, not waited
for, a ready proposal is adopted, else in the default mode (`compression.speculative`) the
deterministic stopgap summary stands in and the model's summary follows in an idle gap; only
the in-turn batch baseline waits for a summary here.
Failures back off 5, 15, then 45 minutes, kept in the store so a restart does not reset them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import structlog

from agent.client_tools import pending_calls
from agent.errors import HermesError
from agent.session_meta import HygieneMeta, read_meta, write_hygiene
from state.contract import MetaStore

if TYPE_CHECKING:
    from agent.agent import AIAgent

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
    agent: AIAgent,
    meta: MetaStore,
    *,
    api_tokens: int | None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    clock: Callable[[], float] = time.time,
) -> HygieneOutcome:
    """Compact `agent`'s session through its context engine when the decision says so.

    Never raises: a failure is counted and backed off, and the user's turn runs either way.
    """
    engine = agent.engine
    facts = _Facts(
        api_tokens=api_tokens,
        # The engine's estimate is calibrated per model from real usage (chars/4 under-counts
        # non-Latin text by a third or more).
        estimated_tokens=engine.current_tokens(agent.transcript),
        context_length=engine.context_length,
        history_len=sum(1 for m in agent.transcript if m.get("role") != "system"),
        # Calls to the caller's tools wait for their results: nothing may cut between them.
        enabled=agent.deps.config.compression.enabled and not pending_calls(agent.transcript),
    )
    decision = facts.decide(backoff_until=None, now=clock())
    if not decision.run:  # the common case: no store round trip
        return HygieneOutcome(decision=decision)
    backoff = (await read_meta(meta, agent.session_id)).hygiene
    decision = facts.decide(backoff_until=backoff.backoff_until, now=clock())
    if not decision.run:
        log.info("hygiene_backed_off", session_id=agent.session_id, reason=decision.reason)
        return HygieneOutcome(decision=decision)
    try:  # on the user's path: in the default mode the stopgap, no summary to wait for
        async with asyncio.timeout(timeout_s):
            error = None if await agent.make_room("hygiene") else "compaction refused"
    except (HermesError, TimeoutError) as exc:
        error = type(exc).__name__
    if error is not None:
        await _record_failure(agent.session_id, meta, backoff, clock(), error)
        return HygieneOutcome(decision=decision, error=error)
    if backoff.failures:
        await write_hygiene(meta, agent.session_id, HygieneMeta())
    log.info(
        "hygiene_compacted",
        session_id=agent.session_id,
        tokens=decision.tokens,
        source=decision.source,
    )
    return HygieneOutcome(decision=decision, compacted=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Facts:
    """What the decision reads from the session, gathered once."""

    api_tokens: int | None
    estimated_tokens: int
    context_length: int
    history_len: int
    enabled: bool

    def decide(self, *, backoff_until: float | None, now: float) -> HygieneDecision:
        return decide_hygiene(
            api_tokens=self.api_tokens,
            estimated_tokens=self.estimated_tokens,
            context_length=self.context_length,
            history_len=self.history_len,
            enabled=self.enabled,
            backoff_until=backoff_until,
            now=now,
        )


async def _record_failure(
    session_id: str, meta: MetaStore, backoff: HygieneMeta, now: float, error: str
) -> None:
    failures = backoff.failures + 1
    until = next_backoff_until(failures, now)
    await write_hygiene(meta, session_id, HygieneMeta(failures=failures, backoff_until=until))
    log.warning(
        "hygiene_failed",
        session_id=session_id,
        failures=failures,
        backoff_s=round(until - now),
        error=error,
    )
