"""A turn's waits from call spans: own calls are not waiting; any summarizer work that delays
the turn is, and the job it belongs to is a blocking compaction."""

from __future__ import annotations

from agent.providers.base import Usage
from sim.latency import Role
from sim.meters import CallSpan
from sim.waits import turn_timing

TURN_TASK, BACKGROUND_TASK, OTHER_BACKGROUND_TASK = 1, 2, 3


def _span(
    role: Role,
    start: float,
    end: float,
    *,
    arrived: float | None = None,
    task: int = TURN_TASK,
    job: int = -1,
) -> CallSpan:
    return CallSpan(
        role=role,
        arrived_s=start if arrived is None else arrived,
        started_s=start,
        ended_s=end,
        usage=Usage(),
        task=task,
        job=job if role == "summary" else -1,
    )


def test_a_turn_of_its_own_calls_waits_for_nothing() -> None:
    """Two back-to-back main calls fill the turn: no compaction wait, no other wait."""
    timing = turn_timing(
        arrived_s=100,
        replied_s=130,
        next_arrived_s=200,
        spans=[_span("main", 100, 110), _span("main", 110, 130)],
    )
    assert (timing.response_s, timing.model_s, timing.compaction_wait_s) == (30, 30, 0)
    assert timing.other_wait_s == 0 and timing.blocking_compactions == 0


def test_an_in_loop_compaction_is_waited_for_and_blocks() -> None:
    """A 40 s summary between the turn's two calls is 40 s of compaction wait, and the batch
    compaction it belongs to blocked the turn."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=60,
        next_arrived_s=100,
        spans=[_span("main", 0, 10), _span("summary", 10, 50, job=0), _span("main", 50, 60)],
    )
    assert timing.compaction_wait_s == 40 and timing.model_s == 20
    assert timing.blocking_jobs == (0,) and timing.summary_s == 40


def test_two_summary_calls_of_one_compaction_block_once() -> None:
    """A compaction that summarizes in two calls is one blocking compaction, not two."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=70,
        next_arrived_s=100,
        spans=[
            _span("summary", 0, 30, job=4),
            _span("summary", 30, 60, job=4),
            _span("main", 60, 70),
        ],
    )
    assert timing.compaction_wait_s == 60 and timing.blocking_compactions == 1


def test_waiting_for_a_running_pass_counts_and_blocks() -> None:
    """A pass from t=-30 to t=20 and a message at t=0 that waits for it: 20 s of compaction
    wait, and the pass delayed the turn, so it is a blocking compaction."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=25,
        next_arrived_s=100,
        spans=[_span("summary", -30, 20, task=BACKGROUND_TASK, job=7), _span("main", 20, 25)],
    )
    assert timing.compaction_wait_s == 20 and timing.blocking_jobs == (7,)
    assert timing.summary_s == 0, "the pass began before this message: the previous turn's"


def test_background_summaries_during_the_turn_are_not_waits() -> None:
    """A summary running while the turn's own calls run (separate capacity) costs the user
    nothing and blocks nothing."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=30,
        next_arrived_s=90,
        spans=[_span("main", 0, 30), _span("summary", 5, 80, task=BACKGROUND_TASK, job=0)],
    )
    assert timing.compaction_wait_s == 0 and timing.blocking_compactions == 0
    assert timing.summary_s == 75


def test_a_prepared_summary_holding_the_one_slot_waits_and_blocks() -> None:
    """Issue 31: a prepared compaction's summary holds the single slot from t=-5 to t=40; the
    user's message at t=0 is queued until 40. That is 40 s of compaction wait and one blocking
    compaction, although the compaction is adopted later (zero-length at the boundary)."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=48,
        next_arrived_s=100,
        spans=[
            _span("summary", -5, 40, task=BACKGROUND_TASK, job=3),
            _span("main", 40, 48, arrived=0),
        ],
    )
    assert timing.compaction_wait_s == 40 and timing.model_s == 8
    assert timing.blocking_jobs == (3,) and timing.other_wait_s == 0


def test_the_same_summary_on_separate_capacity_delays_nothing() -> None:
    """The same prepared summary with capacity of its own: the turn's call is served at once,
    so nothing waits and nothing blocks."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=8,
        next_arrived_s=100,
        spans=[
            _span("summary", -5, 40, task=BACKGROUND_TASK, job=3),
            _span("main", 0, 8),
        ],
    )
    assert timing.compaction_wait_s == 0 and timing.blocking_compactions == 0


def test_a_turn_waiting_for_its_own_summary_blames_it_not_a_bystander() -> None:
    """Separate capacity: while the turn waits for its own in-loop summary, a background pass
    that happens to run at the same time did not delay it."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=50,
        next_arrived_s=100,
        spans=[
            _span("main", 0, 10),
            _span("summary", 10, 40, job=1),
            _span("summary", 5, 45, task=OTHER_BACKGROUND_TASK, job=2),
            _span("main", 40, 50),
        ],
    )
    assert timing.compaction_wait_s == 30 and timing.blocking_jobs == (1,)


def test_a_queue_of_two_background_jobs_blocks_twice() -> None:
    """Shared server: a micro pass then a prepared summary hold the slot while the turn's call
    waits; both jobs delayed it."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=30,
        next_arrived_s=100,
        spans=[
            _span("summary", -2, 8, task=BACKGROUND_TASK, job=5),
            _span("summary", 8, 20, task=OTHER_BACKGROUND_TASK, job=6),
            _span("main", 20, 30, arrived=0),
        ],
    )
    assert timing.compaction_wait_s == 20 and timing.blocking_jobs == (5, 6)


def test_unexplained_waiting_is_reported_apart() -> None:
    """Time in the turn that is neither its own call nor a summary shows up as other_wait_s."""
    timing = turn_timing(
        arrived_s=0,
        replied_s=10,
        next_arrived_s=20,
        spans=[_span("main", 3, 10)],
    )
    assert timing.other_wait_s == 3 and timing.compaction_wait_s == 0
