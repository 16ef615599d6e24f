"""Replay totals: billed-token equivalents, occupancy figures, and what must be deterministic."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent.config import PriceEntry
from agent.providers.base import Usage
from sim.report import (
    CallRecord,
    TurnRow,
    blocking_by_origin,
    format_table,
    strip_timings,
    summarize_calls,
    summarize_mode,
    summarize_waits,
)

PRICE = PriceEntry(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
ROW = TurnRow(
    turn=0,
    kind="explore",
    gap_s=0.0,
    messages_active=5,
    prompt_tokens=100,
    context_tokens=100,
    occupancy_pct=10.0,
    cache_read_tokens=0,
    cache_write_tokens=100,
    input_tokens=0,
    model_calls=1,
    summary_calls=0,
    micro=None,
    micro_ms=0.0,
    batch_compaction=False,
    wait_ms=5.0,
    latency_ms=0.0,
    overhead_ms=2.0,
    store_ms=1.0,
    client_ms=0.5,
)


@pytest.mark.parametrize(
    ("usage", "billed", "uncached"),
    [
        (Usage(input_tokens=1000), 1000, 1000),
        (Usage(cache_write_tokens=1000), 1250, 1000),
        (Usage(cache_read_tokens=1000), 100, 1000),
        (Usage(input_tokens=10, cache_read_tokens=900, cache_write_tokens=90), 10 + 90 + 112, 1000),
    ],
)
def test_billed_equivalent_prices_cache_tokens(usage: Usage, billed: int, uncached: int) -> None:
    """Reads cost a tenth, writes a quarter more; without caching every prompt token is full price."""
    totals = summarize_calls([CallRecord(kind="agent", usage=usage)], PRICE)
    assert totals["billed_input_equiv"] == billed
    assert totals["billed_input_equiv_without_cache"] == uncached


def test_mode_totals_count_compactions_passes_and_peaks() -> None:
    """Peak and mean occupancy, batch compactions and micro outcomes come from the rows; a row
    can hold two passes (the previous turn's ran late)."""
    rows = [
        ROW,
        replace(ROW, turn=1, occupancy_pct=90.0, batch_compaction=True),
        replace(ROW, turn=2, occupancy_pct=20.0, micro="absorbed", micro_ms=3.0),
        replace(
            ROW,
            turn=3,
            occupancy_pct=20.0,
            micro="defragged",
            micro_outcomes=("absorbed", "defragged"),
            micro_ms=9.0,
        ),
    ]
    rows[2] = replace(rows[2], micro_outcomes=("absorbed",))
    calls = [
        CallRecord(kind="agent", usage=Usage(input_tokens=10)),
        CallRecord(kind="summary", usage=Usage(input_tokens=50, output_tokens=7)),
    ]
    totals = summarize_mode(
        rows,
        calls=calls,
        price=PRICE,
        store_rows={"active": 3, "archived": 9},
        findable={"all": True},
        wall_s=1.0,
    )
    assert totals["peak_occupancy_pct"] == 90.0 and totals["mean_occupancy_pct"] == 35.0
    assert totals["batch_compactions"] == 1 and totals["micro_passes"] == 3
    assert totals["micro_outcomes"] == {"absorbed": 2, "defragged": 1}
    assert totals["summarizer_calls"] == 1 and totals["summarizer_input_tokens"] == 50
    assert totals["store_rows_archived"] == 9 and totals["all_user_messages_findable"]
    assert "| x | 90.0 | 35.0 | 1 | 3 |" in format_table({"x": totals})


def test_strip_timings_drops_only_wall_time() -> None:
    """Measured timings go; counts and occupancies stay."""
    value = {"a": [{"wait_ms": 1.0, "occupancy_pct": 5.0}], "wall_s": 3.0, "turns": 2}
    assert strip_timings(value) == {"a": [{"occupancy_pct": 5.0}], "turns": 2}


def test_wait_totals_count_turns_that_waited_and_blocking_compactions() -> None:
    """Waits sum and peak over turns; a turn counts as waiting when it waited at all; response
    percentiles are nearest-rank; the session's length is the last reply's simulated time."""
    rows = [
        replace(ROW, turn=i, arrived_s=600.0 * i, response_s=float(10 + i), model_s=float(10 + i))
        for i in range(20)
    ]
    rows[4] = replace(
        rows[4],
        response_s=104.0,
        compaction_wait_s=90.0,
        blocking_compactions=1,
        blocking_jobs=(3,),
    )
    rows[9] = replace(rows[9], response_s=31.5, compaction_wait_s=12.5, summary_s=40.0)
    totals = summarize_waits(rows)
    assert totals["compaction_wait_s_total"] == 102.5 and totals["compaction_wait_s_max"] == 90.0
    assert totals["turns_waiting_on_compaction"] == 2 and totals["blocking_compactions"] == 1
    assert totals["response_s_p50"] == 21.0 and totals["response_s_p95"] == 31.5
    assert totals["response_s_max"] == 104.0 and totals["summary_s_total"] == 40.0
    assert totals["simulated_hours"] == round((600 * 19 + 29) / 3600, 2)
    table = format_table(
        {
            "x": summarize_mode(
                rows, calls=[], price=PRICE, store_rows={}, findable={"all": True}, wall_s=0.0
            )
        }
    )
    assert "| 102.5 | 90.0 | 2 | 1 | 21.0/31.5 |" in table


def test_wait_totals_of_no_turns_are_zero() -> None:
    """An empty run reports zeros, not an error."""
    totals = summarize_waits([])
    assert totals["compaction_wait_s_total"] == 0 and totals["simulated_hours"] == 0.0


def test_blocking_jobs_are_counted_once_by_origin() -> None:
    """A job that delayed two turns is one blocking compaction; origins come from the tags."""
    rows = [
        replace(ROW, turn=0, blocking_jobs=(1,)),
        replace(ROW, turn=1, blocking_jobs=(1, 2)),
        replace(ROW, turn=2, blocking_jobs=(3,)),
    ]
    origins = {1: "end-of-turn", 2: "end-of-turn", 3: "turn"}
    assert blocking_by_origin(rows, origins) == {"end-of-turn": 2, "turn": 1}
    assert summarize_waits(rows)["blocking_compactions"] == 3
