"""Replay totals: billed-token equivalents, occupancy figures, and what must be deterministic."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent.config import PriceEntry
from agent.providers.base import Usage
from sim.report import (
    CallRecord,
    TurnRow,
    format_table,
    strip_timings,
    summarize_calls,
    summarize_mode,
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
    """Peak and mean occupancy, batch compactions and micro outcomes come from the rows."""
    rows = [
        ROW,
        replace(ROW, turn=1, occupancy_pct=90.0, batch_compaction=True),
        replace(ROW, turn=2, occupancy_pct=20.0, micro="absorbed", micro_ms=3.0),
        replace(ROW, turn=3, occupancy_pct=20.0, micro="defragged", micro_ms=9.0),
    ]
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
    assert totals["batch_compactions"] == 1 and totals["micro_passes"] == 2
    assert totals["micro_outcomes"] == {"absorbed": 1, "defragged": 1}
    assert totals["summarizer_calls"] == 1 and totals["summarizer_input_tokens"] == 50
    assert totals["store_rows_archived"] == 9 and totals["all_user_messages_findable"]
    assert "| x | 90.0 | 35.0 | 1 | 2 |" in format_table({"x": totals})


def test_strip_timings_drops_only_wall_time() -> None:
    """Measured timings go; counts and occupancies stay."""
    value = {"a": [{"wait_ms": 1.0, "occupancy_pct": 5.0}], "wall_s": 3.0, "turns": 2}
    assert strip_timings(value) == {"a": [{"occupancy_pct": 5.0}], "turns": 2}
