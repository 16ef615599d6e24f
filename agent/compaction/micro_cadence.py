"""Micro-compaction's decisions: when a pass runs, when to defrag, when a failing exchange is
skipped; pure functions over values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from agent.compaction.coverage import MIN_COVERAGE

__all__ = [
    "DEFRAG_KEEP_RATIO",
    "FOLD_GROWTH_RATIO",
    "FOLD_OUTPUT_WEIGHT",
    "MAX_HORIZON_TURNS",
    "MAX_FAILURES_PER_EXCHANGE",
    "Cadence",
    "FailureState",
    "after_failure",
    "after_success",
    "cache_ttl_seconds",
    "cold_delay_s",
    "decide_cadence",
    "defrag_rejection",
    "defrag_backoff_floor",
    "fold_horizon_requests",
    "occupancy_pct",
    "requests_per_turn",
    "should_defrag",
]

MAX_FAILURES_PER_EXCHANGE = 3
"""Consecutive failures on one exchange before the cursor moves past it."""
DEFRAG_KEEP_RATIO = 0.85
"""A defrag is kept only if its summary is at most this share of the summary it replaces."""
_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
FOLD_GROWTH_RATIO = 0.3
"""How much of a folded exchange the rolling summary is expected to grow by."""
FOLD_OUTPUT_WEIGHT = 5.0
"""What one generated token costs in prompt tokens: hosted prices put output at 4-5x input
(Anthropic, OpenAI list prices), and a local server decodes some 25x slower than it prefills
(`sim.latency`'s `local`), so 5 is the cautious end for money and a generous one for time."""
MAX_HORIZON_TURNS = 50.0
"""A fold's horizon when the session does not grow (or grows too slowly to say)."""

When = Literal["cold", "always"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cadence:
    """Whether a pass runs after this turn, and why (`reason` goes into the telemetry)."""

    run: bool
    reason: Literal["always", "no_cache", "cold", "occupancy", "warm"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureState:
    """Consecutive failures on the exchange whose first row id is `exchange_id`."""

    exchange_id: int | None = None
    count: int = 0
    total: int = 0


def cache_ttl_seconds(ttl: str | None) -> float | None:
    """The TTL in seconds ("5m" 300, "1h" 3600); None without caching; unknown counts as 5m."""
    if ttl is None:
        return None
    return _TTL_SECONDS.get(ttl, _TTL_SECONDS["5m"])


def decide_cadence(
    *,
    when: When,
    now: float,
    last_request_at: float | None,
    cache_ttl_s: float | None,
    tokens: int,
    threshold_tokens: int,
    occupancy_trigger: float,
) -> Cadence:
    """`always` runs every turn. `cold` runs when a rewrite of the prompt prefix costs no cache
    write (nothing cached yet, or idle past the TTL) or when occupancy of the threshold reaches
    `occupancy_trigger`; otherwise it leaves the warm prefix alone. Without caching (`no_cache`)
    a pass is only a candidate: it folds only what pays for itself
    (`agent.compaction.fold_cost.fold_pays`)."""
    if when == "always":
        return Cadence(run=True, reason="always")
    if cache_ttl_s is None:
        return Cadence(run=True, reason="no_cache")
    if last_request_at is None or now - last_request_at > cache_ttl_s:
        return Cadence(run=True, reason="cold")
    if threshold_tokens > 0 and tokens >= threshold_tokens * occupancy_trigger:
        return Cadence(run=True, reason="occupancy")
    return Cadence(run=False, reason="warm")


def occupancy_pct(tokens: int, threshold_tokens: int, context_length: int) -> float | None:
    """`tokens` as a percentage of the compaction threshold; None while the window is unknown."""
    if context_length <= 0 or threshold_tokens <= 0:
        return None
    return round(100.0 * tokens / threshold_tokens, 1)


def should_defrag(summary_tokens: int, defrag_tokens: int, backoff_floor: int) -> bool:
    """The rolling summary passed the defrag size (and the size a rejected defrag left it at)."""
    return summary_tokens > max(defrag_tokens, backoff_floor)


def defrag_rejection(
    *, new_summary_tokens: int, old_summary_tokens: int, middle_coverage: float
) -> str | None:
    """Why a defrag must not be kept, or None to keep it.

    It is judged on the summary alone: the new one must be clearly smaller than the old one
    (a 1:1 rewrite, or one that merely swallowed the middle, is not a defrag). And the middle
    it absorbed must still be named in it, or that middle would silently leave the context.
    """
    if new_summary_tokens > old_summary_tokens * DEFRAG_KEEP_RATIO:
        return "not_smaller"
    if middle_coverage < MIN_COVERAGE:
        return "middle_dropped"
    return None


def defrag_backoff_floor(summary_tokens: int, defrag_tokens: int) -> int:
    """After a rejected or failed defrag, wait until the summary grows by half the defrag size."""
    return summary_tokens + max(1, defrag_tokens // 2)


def after_failure(state: FailureState, exchange_id: int | None) -> tuple[FailureState, bool]:
    """Count one failure on `exchange_id`; True when the cursor must now skip that exchange."""
    same = exchange_id is not None and exchange_id == state.exchange_id
    count = state.count + 1 if same else 1
    if count >= MAX_FAILURES_PER_EXCHANGE:
        return FailureState(total=state.total + 1), True
    return FailureState(exchange_id=exchange_id, count=count, total=state.total + 1), False


def after_success(state: FailureState) -> FailureState:
    """A pass worked: the consecutive count starts over."""
    return replace(state, exchange_id=None, count=0)


def fold_horizon_requests(
    *, tokens: int, threshold_tokens: int, growth_per_turn: float, requests_per_turn: float
) -> float:
    """How many more requests will carry a folded exchange: those of the turns left before the
    next batch compaction absorbs it anyway (the room below the threshold over the session's
    growth per turn, at most `MAX_HORIZON_TURNS`), at least one."""
    per_turn = max(1.0, requests_per_turn)
    if threshold_tokens <= 0:
        return per_turn
    left = max(0, threshold_tokens - tokens)
    turns = MAX_HORIZON_TURNS if left else 0.0
    if left and growth_per_turn > 0:
        turns = min(MAX_HORIZON_TURNS, left / growth_per_turn)
    return max(1.0, turns * per_turn)


def requests_per_turn(roles: Sequence[str]) -> float:
    """Model requests per user turn, from the roles of the newest turns' messages ("user" for
    a real user message, "assistant" for a reply or a tool call): each assistant message is one
    request. 1 when there is no turn to count."""
    users = sum(1 for role in roles if role == "user")
    if users == 0:
        return 1.0
    return max(1.0, sum(1 for role in roles if role == "assistant") / users)


COLD_MARGIN_S = 1.0
"""Run this long after the TTL so the provider's cache has surely expired."""


def cold_delay_s(
    *,
    when: When,
    now: float,
    last_request_at: float | None,
    cache_ttl_s: float | None,
    tokens: int,
    threshold_tokens: int,
    occupancy_trigger: float,
) -> float:
    """How long to wait before a pass: 0 when `decide_cadence` would run it now, else until the
    prompt cache has gone cold. A new turn arriving first cancels the wait (the cache stayed warm)."""
    cadence = decide_cadence(
        when=when,
        now=now,
        last_request_at=last_request_at,
        cache_ttl_s=cache_ttl_s,
        tokens=tokens,
        threshold_tokens=threshold_tokens,
        occupancy_trigger=occupancy_trigger,
    )
    if cadence.run or cache_ttl_s is None or last_request_at is None:
        return 0.0
    return max(0.0, cache_ttl_s - (now - last_request_at)) + COLD_MARGIN_S
