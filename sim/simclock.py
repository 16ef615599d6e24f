"""The replay's simulated time: sleepers on a `ManualClock`, and the pump that moves the clock on.

Everything that takes simulated time sleeps on `SimSleep` (a model call for its modeled seconds,
end-of-turn work waiting for a cold prompt cache). Nothing else moves the clock: the driver asks
the `Pump` to run a turn (`drive`) or an idle gap (`idle_until`), and the pump advances the clock
to the earliest sleeper's due time, one sleeper at a time, only when nothing else can progress.

The quiescence rule, in full: the pump advances only when

1. no tracked operation is in flight (`Activity`: a model call's HTTP exchange before its modeled
   sleep starts, a store call); while one is, the pump waits for it to end (real I/O), and
2. `POLLS` consecutive event-loop iterations passed with no tracked change at all (no operation
   began or ended, no sleeper was added, woken or cancelled), so every task that was ready has run
   until it blocked on a sleeper or on something the pump does not track, and
3. the work being driven has not finished (a finished turn returns at once, before any advance).

Rule 2 covers the short untracked stretches between two tracked steps (a task waking from a lock,
a shielded task's completion callback): each takes an iteration or two, and `POLLS` is ten times
that. Sleepers wake in due order (ties in the order they went to sleep), so a run is deterministic.
The ordering error this prevents: while a turn's next model call is still on the wire at t, a
background sleeper due at t + 5 must not wake first; the call's HTTP exchange is in flight, so the
pump waits, the call goes to sleep until t + its seconds, and only then is the earliest due chosen.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

from sim.llm_server import ManualClock

__all__ = ["POLLS", "Activity", "Pump", "SimSleep"]

POLLS = 20
"""Event-loop iterations without a tracked change before the pump calls the loop quiet."""
T = TypeVar("T")


class Activity:
    """What the pump watches: tracked operations in flight and a counter of changes."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.version = 0
        self._changed = asyncio.Event()

    def bump(self) -> None:
        """Something the pump must look at again happened."""
        self.version += 1
        self._changed.set()

    @contextlib.contextmanager
    def operation(self) -> Iterator[None]:
        """Mark real work in flight (a model call's exchange, a store call) for its duration."""
        self.in_flight += 1
        self.bump()
        try:
            yield
        finally:
            self.in_flight -= 1
            self.bump()

    async def wait_change(self, work: asyncio.Future[Any] | None = None) -> None:
        """Until the next change (or until `work` is done)."""
        self._changed.clear()
        waiter = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait([waiter, *([work] if work else [])], return_when="FIRST_COMPLETED")
        finally:
            waiter.cancel()


class SimSleep:
    """`asyncio.sleep` on the simulated clock: sleepers wake when the pump reaches their time."""

    def __init__(self, clock: ManualClock, activity: Activity | None = None) -> None:
        self._clock = clock
        self._activity = activity or Activity()
        self._order = itertools.count()
        self._sleepers: dict[int, tuple[float, asyncio.Future[None]]] = {}

    async def __call__(self, seconds: float) -> None:
        await self.until(self._clock() + seconds)

    async def until(self, due: float) -> None:
        """Sleep until the clock reads `due` (at once when it already does)."""
        if due <= self._clock():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        key = next(self._order)
        self._sleepers[key] = (due, future)
        self._activity.bump()
        try:
            await future
        finally:
            del self._sleepers[key]
            self._activity.bump()

    def next_due(self) -> float | None:
        """When the earliest sleeper wakes; None when nobody sleeps."""
        pending = [due for due, future in self._sleepers.values() if not future.done()]
        return min(pending, default=None)

    def advance_to(self, when: float) -> int:
        """Set the clock to `when` (never back); wake every sleeper now due, in due order."""
        self._clock.now = max(self._clock.now, when)
        now = self._clock.now
        due = sorted((d, k, f) for k, (d, f) in self._sleepers.items() if d <= now and not f.done())
        for _, _, future in due:
            future.set_result(None)
        if due:
            self._activity.bump()
        return len(due)


class Pump:
    """Runs simulated work to completion, moving the clock only when the loop is quiet."""

    def __init__(self, sleep: SimSleep, activity: Activity, clock: ManualClock) -> None:
        self._sleep = sleep
        self._activity = activity
        self._clock = clock
        self.advances = 0
        """How many times the clock moved (for tests and curiosity)."""

    async def drive(self, work: Awaitable[T]) -> T:
        """Await `work`, advancing the clock through whatever it sleeps on."""
        task: asyncio.Future[T] = asyncio.ensure_future(work)
        try:
            while not task.done():
                if not await self._quiet(task):
                    break
                due = self._sleep.next_due()
                if due is None:  # blocked on something untracked: let it happen
                    await self._activity.wait_change(task)
                    continue
                self._advance(due)
            return await task
        finally:
            task.cancel()

    async def idle_until(self, when: float) -> None:
        """Let time pass until `when` (the user is idle): background work runs as it is due."""
        while True:
            await self._quiet(None)
            due = self._sleep.next_due()
            if due is None or due > when:
                self._advance(when)
                return
            self._advance(due)

    def _advance(self, when: float) -> None:
        if when > self._clock.now:
            self.advances += 1
        self._sleep.advance_to(when)

    async def _quiet(self, work: asyncio.Future[T] | None) -> bool:
        """Until nothing but the clock can move things on (True), or `work` is done (False)."""
        while True:
            if work is not None and work.done():
                return False
            if self._activity.in_flight:
                await self._activity.wait_change(work)
                continue
            version = self._activity.version
            for _ in range(POLLS):
                await asyncio.sleep(0)
                if self._activity.version != version or (work is not None and work.done()):
                    break
            else:
                return True
