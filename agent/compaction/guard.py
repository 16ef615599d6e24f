"""Loop protection for automatic compaction: backoff after failed or useless passes, and a cap.

Pure transitions over a frozen `GuardState`. Time is counted twice: in checks (one per
`should_compress` call) and in seconds on the caller's clock; a backoff ends when both have
passed, so neither a fast tool loop nor a slow chat can make compaction fire every turn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "FREQUENCY_MAX",
    "FREQUENCY_WINDOW_CHECKS",
    "GuardState",
    "after_attempt_failed",
    "after_compaction",
    "after_judgement",
    "backoff_checks",
    "backoff_seconds",
    "blocked_reason",
    "tick",
]

BACKOFF_BASE_S = 5.0
BACKOFF_MAX_S = 600.0
BACKOFF_MAX_CHECKS = 64
FREQUENCY_MAX = 3
FREQUENCY_WINDOW_CHECKS = 20
"""At most FREQUENCY_MAX automatic compactions within this many checks."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardState:
    checks: int = 0
    consecutive_failures: int = 0
    total_failures: int = 0
    blocked_until_check: int = 0
    blocked_until_s: float = 0.0
    recent_checks: tuple[int, ...] = ()
    """Checks at which recent automatic compactions ran."""
    awaiting_judgement: bool = False
    """A compaction ran; the next real usage says whether it helped."""


def backoff_checks(failures: int) -> int:
    """Checks to skip after `failures` consecutive failures: 1, 2, 4 ... 64."""
    return min(int(2 ** max(0, failures - 1)), BACKOFF_MAX_CHECKS)


def backoff_seconds(failures: int) -> float:
    """Seconds to wait after `failures` consecutive failures: 5, 10, 20 ... 600."""
    return min(BACKOFF_BASE_S * float(2 ** max(0, failures - 1)), BACKOFF_MAX_S)


def tick(state: GuardState) -> GuardState:
    """One `should_compress` check happened."""
    return replace(state, checks=state.checks + 1)


def blocked_reason(state: GuardState, now_s: float) -> str | None:
    """Why automatic compaction must not run now, or None."""
    if state.checks < state.blocked_until_check or now_s < state.blocked_until_s:
        return "backoff"
    window_start = state.checks - FREQUENCY_WINDOW_CHECKS
    if sum(1 for c in state.recent_checks if c > window_start) >= FREQUENCY_MAX:
        return "frequency"
    return None


def after_attempt_failed(state: GuardState, now_s: float) -> GuardState:
    """A refused, failed or useless pass: count it and back off exponentially."""
    failures = state.consecutive_failures + 1
    return replace(
        state,
        consecutive_failures=failures,
        total_failures=state.total_failures + 1,
        blocked_until_check=state.checks + backoff_checks(failures) + 1,
        blocked_until_s=now_s + backoff_seconds(failures),
        awaiting_judgement=False,
    )


def after_compaction(state: GuardState, *, automatic: bool) -> GuardState:
    """A pass rewrote the transcript; it is judged by the next real usage."""
    recent = state.recent_checks
    if automatic:
        window_start = state.checks - FREQUENCY_WINDOW_CHECKS
        recent = (*[c for c in recent if c > window_start], state.checks)
    return replace(state, recent_checks=recent, awaiting_judgement=True)


def after_judgement(state: GuardState, *, effective: bool, now_s: float) -> GuardState:
    """The first real usage after a pass: below the threshold clears failures, else back off."""
    if not state.awaiting_judgement:
        return state
    if effective:
        return replace(state, consecutive_failures=0, awaiting_judgement=False)
    return after_attempt_failed(state, now_s)
