"""Backoff, frequency cap and judgement of automatic compaction."""

from __future__ import annotations

import pytest

from agent.compaction.guard import (
    FREQUENCY_MAX,
    GuardState,
    after_attempt_failed,
    after_compaction,
    after_judgement,
    backoff_checks,
    backoff_seconds,
    blocked_reason,
    tick,
)


@pytest.mark.parametrize(
    ("failures", "checks", "seconds"),
    [(1, 1, 5.0), (2, 2, 10.0), (3, 4, 20.0), (7, 64, 320.0), (20, 64, 600.0)],
)
def test_backoff_grows_exponentially_and_caps(failures: int, checks: int, seconds: float) -> None:
    """1, 2, 4 ... 64 checks and 5, 10, 20 ... 600 seconds."""
    assert (backoff_checks(failures), backoff_seconds(failures)) == (checks, seconds)


def test_failure_blocks_until_both_checks_and_seconds_pass() -> None:
    """After a failure the guard reports backoff until enough checks and seconds went by."""
    state = after_attempt_failed(tick(GuardState()), now_s=100.0)
    assert state.consecutive_failures == 1 and state.total_failures == 1
    state = tick(state)
    assert blocked_reason(state, 200.0) == "backoff"  # one check skipped, not yet passed
    state = tick(state)
    assert blocked_reason(state, 101.0) == "backoff"  # checks passed, seconds not
    assert blocked_reason(state, 105.0) is None


def test_frequency_cap_counts_only_automatic_passes_in_the_window() -> None:
    """FREQUENCY_MAX automatic passes within the window block the next; manual ones do not count."""
    state = GuardState()
    for _ in range(FREQUENCY_MAX):
        state = after_compaction(tick(state), automatic=True)
        state = after_judgement(state, effective=True, now_s=0.0)
    assert blocked_reason(tick(state), 0.0) == "frequency"
    manual = after_compaction(tick(GuardState()), automatic=False)
    assert manual.recent_checks == ()
    for _ in range(25):
        state = tick(state)
    assert blocked_reason(state, 0.0) is None


@pytest.mark.parametrize(("effective", "failures"), [(True, 0), (False, 2)])
def test_judgement_by_next_usage(effective: bool, failures: int) -> None:
    """A pass judged useless counts as a failure; a useful one clears the streak."""
    state = after_attempt_failed(GuardState(), now_s=0.0)
    state = after_compaction(state, automatic=True)
    state = after_judgement(state, effective=effective, now_s=0.0)
    assert state.consecutive_failures == failures and not state.awaiting_judgement
    assert after_judgement(state, effective=False, now_s=0.0) is state  # judged once only
