"""A turn's waits from call spans: own calls are not waiting, summaries on the path are."""

from __future__ import annotations

from agent.providers.base import Usage
from sim.latency import Role
from sim.meters import CallSpan
from sim.waits import turn_timing


def _span(role: Role, start: float, end: float, *, arrived: float | None = None) -> CallSpan:
    return CallSpan(
        role=role,
        arrived_s=start if arrived is None else arrived,
        started_s=start,
        ended_s=end,
        usage=Usage(),
    )


def test_a_turn_of_its_own_calls_waits_for_nothing() -> None:
    """Two back-to-back main calls fill the turn: no compaction wait, no other wait."""
    timing = turn_timing(
        arrived_s=100,
        replied_s=130,
        next_arrived_s=200,
        spans=[_span("main", 100, 110), _span("main", 110, 130)],
        compactions=[],
    )
    assert (timing.response_s, timing.model_s, timing.compaction_wait_s) == (30, 30, 0)
    assert timing.other_wait_s == 0 and timing.blocking_compactions == 0


def test_an_in_loop_compaction_is_waited_for_and_blocks() -> None:
    """A 40 s summary between the turn's two calls is 40 s of compaction wait, and the batch
    compaction around it blocked the turn."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=60,
        next_arrived_s=100,
        spans=[_span("main", 0, 10), _span("summary", 10, 50), _span("main", 50, 60)],
        compactions=[(10, 50)],
    )
    assert timing.compaction_wait_s == 40 and timing.model_s == 20
    assert timing.blocking_compactions == 1 and timing.summary_s == 40


def test_waiting_for_a_running_pass_counts_only_the_remainder() -> None:
    """A pass from t=-30 to t=20 and a message at t=0: the turn waits 20 s, then calls."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=25,
        next_arrived_s=100,
        spans=[_span("summary", -30, 20), _span("main", 20, 25)],
        compactions=[],
    )
    assert timing.compaction_wait_s == 20 and timing.blocking_compactions == 0
    assert timing.summary_s == 0, "the pass began before this message: the previous turn's"


def test_background_summaries_during_the_turn_are_not_waits() -> None:
    """A summary running while the turn's own calls run (speculative compaction) costs the user
    nothing, and a compaction swapped in at the boundary (zero length) does not block."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=30,
        next_arrived_s=90,
        spans=[_span("main", 0, 30), _span("summary", 5, 80)],
        compactions=[(0, 0), (5, 80)],
    )
    assert timing.compaction_wait_s == 0 and timing.blocking_compactions == 0
    assert timing.summary_s == 75


def test_a_call_queued_behind_a_summary_on_a_shared_server_waits_on_compaction() -> None:
    """The turn's call arrives at t=0 but is served from t=12, after a summary that held the
    one local server: 12 s of compaction wait."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=20,
        next_arrived_s=50,
        spans=[_span("summary", -5, 12), _span("main", 12, 20, arrived=0)],
        compactions=[],
    )
    assert timing.compaction_wait_s == 12 and timing.model_s == 8


def test_unexplained_waiting_is_reported_apart() -> None:
    """Time in the turn that is neither its own call nor a summary shows up as other_wait_s."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=10,
        next_arrived_s=20,
        spans=[_span("main", 3, 10)],
        compactions=[],
    )
    assert timing.other_wait_s == 3 and timing.compaction_wait_s == 0
