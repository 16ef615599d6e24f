"""What a user waited for in one turn, from the calls' spans on the simulated clock; pure.

A turn runs from the user's message (`arrived_s`) to the reply (`replied_s`). Only model calls take
simulated time (tools, the store and the runtime's own work are instant on it), so the turn is
either in one of its own main-model calls or waiting. Waiting while a summarizer call is being
served (a batch compaction in the loop, gateway hygiene, a micro pass still running that the turn
waits for, or a summary holding a shared server) is `compaction_wait_s`; any other waiting is
`other_wait_s`, which should be 0 and flags a driver bug when it is not.

A compaction (from the agent's `CompactionBegan` and `CompactionCommitted` events) is blocking when
its own interval overlaps the turn's waiting: its summary call was on the turn's critical path. A
compaction prepared in the background and swapped in at a turn boundary takes no waiting time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sim.meters import CallSpan

__all__ = ["TurnTiming", "turn_timing"]

EPSILON_S = 1e-6
Interval = tuple[float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnTiming:
    """One turn on the simulated clock, in seconds."""

    response_s: float
    """Message to reply."""
    model_s: float
    """Of which the turn's own main-model calls."""
    compaction_wait_s: float
    """Of which waiting while a summarizer call was served."""
    other_wait_s: float
    blocking_compactions: int
    summary_s: float
    """Summarizer seconds of the calls that began between this message and the next one."""


def turn_timing(
    *,
    arrived_s: float,
    replied_s: float,
    next_arrived_s: float,
    spans: Sequence[CallSpan],
    compactions: Sequence[Interval],
) -> TurnTiming:
    """The turn's timing from every call of the run and every compaction's interval."""
    window = (arrived_s, replied_s)
    own = [
        (s.started_s, s.ended_s)
        for s in spans
        if s.role == "main" and arrived_s <= s.arrived_s < replied_s
    ]
    busy = _clip(_union(own), window)
    waiting = _subtract([window], busy)
    summaries = _union((s.started_s, s.ended_s) for s in spans if s.role == "summary")
    on_compaction = _measure(_intersect(waiting, summaries))
    blocking = sum(1 for c in compactions if _measure(_intersect(waiting, [c])) > EPSILON_S)
    return TurnTiming(
        response_s=_round(replied_s - arrived_s),
        model_s=_round(_measure(busy)),
        compaction_wait_s=_round(on_compaction),
        other_wait_s=_round(_measure(waiting) - on_compaction),
        blocking_compactions=blocking,
        summary_s=_round(
            sum(
                s.seconds
                for s in spans
                if s.role == "summary" and arrived_s <= s.arrived_s < next_arrived_s
            )
        ),
    )


def _round(seconds: float) -> float:
    return round(max(0.0, seconds), 3)


def _union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _clip(intervals: Sequence[Interval], window: Interval) -> list[Interval]:
    return _intersect(intervals, [window])


def _intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    out = [(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b]
    return _union(i for i in out if i[1] > i[0])


def _subtract(base: Sequence[Interval], holes: Sequence[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for start, end in base:
        cursor = start
        for h_start, h_end in _union(holes):
            if h_end <= cursor or h_start >= end:
                continue
            if h_start > cursor:
                out.append((cursor, h_start))
            cursor = max(cursor, h_end)
        if cursor < end:
            out.append((cursor, end))
    return out


def _measure(intervals: Sequence[Interval]) -> float:
    return sum(end - start for start, end in intervals)
