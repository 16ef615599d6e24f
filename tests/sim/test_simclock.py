"""The simulated clock's pump: it moves time only when nothing else can move, in due order."""

from __future__ import annotations

import asyncio
import time

import pytest

from sim.llm_server import ManualClock
from sim.simclock import POLLS, Activity, Pump, SimSleep


def _sim() -> tuple[ManualClock, Activity, SimSleep, Pump]:
    clock, activity = ManualClock(now=0.0), Activity()
    sleep = SimSleep(clock, activity)
    return (
        clock,
        activity,
        sleep,
        Pump(sleep, activity, clock),
    )


async def _io(activity: Activity, seconds: float = 0.02) -> None:
    """A tracked operation on real I/O (a thread), like a store call or an HTTP exchange."""
    with activity.operation():
        await asyncio.to_thread(time.sleep, seconds)


async def test_a_pass_longer_than_the_gap_makes_the_next_turn_wait_the_remainder() -> None:
    """A 50 s background pass after a reply at t=0 and a user back at t=20: a turn that waits
    for the running pass (as today's runtime does) starts its 5 s call at t=50 and replies at 55."""
    clock, activity, sleep, pump = _sim()
    background = asyncio.create_task(sleep(50))
    await pump.idle_until(20)
    assert clock() == 20 and not background.done()

    async def turn() -> tuple[float, float]:
        await background
        started = clock()
        await _io(activity)
        await sleep(5)
        return started, clock()

    assert await pump.drive(turn()) == (50, 55)


async def test_no_advance_while_an_operation_is_in_flight() -> None:
    """A call on the wire at t=95 is not overtaken by a sleeper due at t=100: it starts at 95 and
    ends at 105, and the sleeper wakes at 100 in between."""
    clock, activity, sleep, pump = _sim()
    woke: list[float] = []

    async def background() -> None:
        await sleep(100)
        woke.append(clock())

    task = asyncio.create_task(background())
    await pump.idle_until(95)

    async def turn() -> tuple[float, float]:
        await _io(activity, 0.05)  # the pump must wait for this, not jump to t=100
        started = clock()
        await sleep(10)
        return started, clock()

    assert await pump.drive(turn()) == (95, 105)
    assert woke == [100]
    await task


async def test_short_untracked_stretches_between_operations_do_not_fool_the_pump() -> None:
    """A few bare loop iterations between two tracked steps (a lock, a task's callback) are
    shorter than the quiet window, so a later sleeper does not wake in the middle."""
    clock, activity, sleep, pump = _sim()
    asyncio.create_task(sleep(30))
    bare = 5
    assert bare < POLLS

    async def turn() -> float:
        await _io(activity)
        for _ in range(bare):
            await asyncio.sleep(0)
        await _io(activity)
        await sleep(10)
        return clock()

    assert await pump.drive(turn()) == 10


async def test_sleepers_wake_in_due_order_and_ties_in_sleep_order() -> None:
    """Three sleepers due at 7, 3 and 3 wake as 3 (first), 3 (second), 7."""
    clock, _, sleep, pump = _sim()
    order: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await sleep(seconds)
        order.append((name, clock()))

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("late", 7), ("a", 3), ("b", 3))]
    await pump.drive(asyncio.gather(*tasks))
    assert order == [("a", 3), ("b", 3), ("late", 7)]


async def test_idle_runs_what_is_due_and_leaves_later_sleepers_asleep() -> None:
    """An idle gap to t=60 runs a pass due at t=40 to its end (t=45) and stops at 60 with a
    sleeper due at t=90 still asleep."""
    clock, activity, sleep, pump = _sim()
    marks: list[float] = []

    async def pass_after_cold_cache() -> None:
        await sleep(40)
        await _io(activity)
        await sleep(5)
        marks.append(clock())

    done = asyncio.create_task(pass_after_cold_cache())
    later = asyncio.create_task(sleep(90))
    await pump.idle_until(60)
    assert clock() == 60 and marks == [45] and done.done()
    assert not later.done() and sleep.next_due() == 90
    later.cancel()
    with pytest.raises(asyncio.CancelledError):
        await later
    assert sleep.next_due() is None


async def test_work_that_finishes_returns_without_moving_the_clock() -> None:
    """A turn that takes no simulated time returns at once, even with a sleeper pending."""
    clock, activity, sleep, pump = _sim()
    pending = asyncio.create_task(sleep(1_000))

    async def instant() -> str:
        await _io(activity)
        return "done"

    assert await pump.drive(instant()) == "done"
    assert clock() == 0 and pump.advances == 0
    pending.cancel()


async def test_a_cancelled_sleeper_is_forgotten() -> None:
    """Cancelling a sleeper (a turn cancels a pass waiting for a cold cache) removes it."""
    clock, _, sleep, pump = _sim()
    waiting = asyncio.create_task(sleep(300))
    await pump.idle_until(10)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await pump.idle_until(400)
    assert clock() == 400 and pump.advances == 2
