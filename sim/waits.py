"""What a user waited for in one turn, from the calls' spans on the simulated clock; pure.

A turn runs from the user's message (`arrived_s`) to the reply (`replied_s`). Only model calls take
simulated time (tools, the store and the runtime's own work are instant on it), so the turn is
either in one of its own main-model calls being served or waiting. Waiting while any summarizer
call is being served is `compaction_wait_s`: a batch compaction in the loop, gateway hygiene, a
micro pass the turn waits for, or a summary (prepared, micro, any) holding a shared server while
the turn's own call is queued behind it. Any other waiting is `other_wait_s`, which should be 0
and flags a driver bug when it is not.

Which compactions delayed the turn (`blocking_jobs`, one per summarizer job: `sim.meters.TaskTags`):
while the turn waits, a summary call made by the turn's own task is what it waits for; where none
of its own is being served, every summary call being served then is (on a shared one-slot server
that is the one holding the slot; with separate capacity, work the turn waits for). A job is
blocking whatever its kind: prepared in the background and adopted later, it still blocked a turn
if it held the server while the turn was queued. A compaction with no summary call (a local,
deterministic summary) takes no simulated time and never blocks.
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
    """Of which the turn's own main-model calls being served."""
    compaction_wait_s: float
    """Of which waiting while a summarizer call was served."""
    other_wait_s: float
    blocking_jobs: tuple[int, ...]
    """The summarizer jobs that delayed the turn (`CallSpan.job`), in order."""
    summary_s: float
    """Summarizer seconds of the calls that began between this message and the next one."""

    @property
    def blocking_compactions(self) -> int:
        return len(self.blocking_jobs)


def turn_timing(
    *,
    arrived_s: float,
    replied_s: float,
    next_arrived_s: float,
    spans: Sequence[CallSpan],
) -> TurnTiming:
    """The turn's timing from every call of the run."""
    window = (arrived_s, replied_s)
    own = [s for s in spans if s.role == "main" and arrived_s <= s.arrived_s < replied_s]
    busy = _clip(_union((s.started_s, s.ended_s) for s in own), window)
    waiting = _subtract([window], busy)
    tasks = {s.task for s in own}
    summaries = [
        s
        for s in spans
        if s.role == "summary" and s.started_s < replied_s and s.ended_s > arrived_s
    ]
    on_compaction = _measure(_intersect(waiting, _union(_interval(s) for s in summaries)))
    mine = _union(_interval(s) for s in summaries if s.task in tasks)
    elsewhere = _subtract(waiting, mine)
    waiting_on_mine = _intersect(waiting, mine)
    blocking: list[int] = []
    for s in summaries:
        during = waiting_on_mine if s.task in tasks else elsewhere
        if s.job not in blocking and _measure(_intersect(during, [_interval(s)])) > EPSILON_S:
            blocking.append(s.job)
    return TurnTiming(
        response_s=_round(replied_s - arrived_s),
        model_s=_round(_measure(busy)),
        compaction_wait_s=_round(on_compaction),
        other_wait_s=_round(_measure(waiting) - on_compaction),
        blocking_jobs=tuple(blocking),
        summary_s=_round(
            sum(
                s.seconds
                for s in spans
                if s.role == "summary" and arrived_s <= s.arrived_s < next_arrived_s
            )
        ),
    )


def _interval(span: CallSpan) -> Interval:
    return (span.started_s, span.ended_s)


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
