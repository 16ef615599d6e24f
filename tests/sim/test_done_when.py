"""Issue 31's "Done when" on one replay result, and the generated tables; pure, hand-built."""

from __future__ import annotations

from typing import Any

import pytest

from sim.done_when import checks, full_table, replace_block, short_table


def _totals(**overrides: Any) -> dict[str, Any]:
    totals: dict[str, Any] = {
        "turns": 500,
        "compaction_wait_s_total": 0.0,
        "compaction_wait_s_max": 0.0,
        "turns_waiting_on_compaction": 0,
        "blocking_compactions": 0,
        "batch_compactions": 20,
        "micro_passes": 0,
        "summarizer_calls": 20,
        "peak_occupancy_pct": 98.0,
        "peak_window_pct": 80.0,
        "billed_input_equiv": 1_000_000,
        "cost_usd": 10.0,
        "response_s_p50": 30.0,
        "response_s_p95": 90.0,
        "all_user_messages_findable": True,
        "findable": {"found_by_store_search": 500},
        "recall": "50/50",
        "recall_by_words": "23/50",
        "wall_s": 60.0,
    }
    return {**totals, **overrides}


def _result(window: int, default: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
    return {
        "options": {"context_window": window, "turns": 500, "route": "custom"},
        "modes": {"batch": batch, "micro-cold": default},
    }


def _failed(result: dict[str, Any]) -> list[str]:
    return [c.name for c in checks(result) if not c.passed]


def test_a_default_that_never_waits_and_costs_less_meets_every_condition() -> None:
    """0 s waited against batch's 2,000 s, 20 compactions in 500 turns, cheaper: all met."""
    batch = _totals(compaction_wait_s_total=2_000.0, billed_input_equiv=1_200_000, cost_usd=12.0)
    assert _failed(_result(128_000, _totals(), batch)) == []


def test_each_condition_fails_on_its_own() -> None:
    """Issue 31's figures for today's default on one server: 932 s waited in 20 turns, a
    compaction every 1.8 turns, a prompt past the window, costlier than batch; each fails."""
    batch = _totals(compaction_wait_s_total=2_172.0)
    default = _totals(
        compaction_wait_s_total=932.0,
        turns_waiting_on_compaction=20,
        batch_compactions=278,
        peak_window_pct=101.3,
        billed_input_equiv=1_100_000,
        cost_usd=11.0,
        all_user_messages_findable=False,
    )
    assert _failed(_result(128_000, default, batch)) == [
        "wait <= 5% of batch",
        "<= 2 turns waiting",
        "<= 1 compaction per 10 turns",
        "peak <= 100% of the window",
        "billed input <= batch",
        "cost <= batch",
        "findable 100%",
    ]


@pytest.mark.parametrize(("window", "applies"), [(128_000, True), (32_000, False)])
def test_turns_waiting_is_checked_at_a_large_window_only(window: int, applies: bool) -> None:
    """ "<= 2 turns waiting" is the 128K condition; at 32K only the total share counts."""
    batch = _totals(compaction_wait_s_total=10_000.0)
    default = _totals(compaction_wait_s_total=100.0, turns_waiting_on_compaction=5)
    assert ("<= 2 turns waiting" in _failed(_result(window, default, batch))) is applies


def test_tables_name_the_default_and_the_verdict() -> None:
    """The full table has a row per mode with ratios to batch; the short one a verdict."""
    batch = _totals(compaction_wait_s_total=2_000.0, cost_usd=20.0)
    result = _result(128_000, _totals(cost_usd=10.0), batch)
    full = full_table([result])
    assert "| 128K, 500 turns, custom | **micro-cold** (default) |" in full
    assert "10.00 (0.50x)" in full and "50/50 / 23/50" in full
    short = short_table([result])
    assert "0 s / 2,000 s" in short and short.rstrip().endswith("| met |")


def test_a_block_is_replaced_between_its_markers_only() -> None:
    """Text outside the markers stays; a page without the markers is refused."""
    page = "a\n<!-- t:start -->\nold\n<!-- t:end -->\nb\n"
    assert replace_block(page, "t", "new") == "a\n<!-- t:start -->\nnew\n<!-- t:end -->\nb\n"
    with pytest.raises(ValueError, match="no <!-- u:start -->"):
        replace_block(page, "u", "new")
