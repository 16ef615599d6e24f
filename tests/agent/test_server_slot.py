"""Background work on a single-slot model server: it runs between user turns and gives way.

Issue 31: background work "never holds the server when a turn is pending; prepares in idle
gaps; a pending user request cancels or pauses it". `BackgroundWork` with a work held at a gate,
and `ServerSlot` as the runtime shares it between sessions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agent.background import BackgroundWork
from agent.proposals import Proposal
from agent.server_slot import ServerSlot
from tests.waits import WAIT_S


@dataclass
class _Session:
    session_id: str


@dataclass
class _GatedWork:
    """An end-of-turn work that holds the server until its gate opens."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    runs: int = 0
    finished: int = 0

    def delay_s(self, session: object) -> float | None:
        return 0.0

    async def __call__(self, session: object) -> Proposal | None:
        self.runs += 1
        self.started.set()
        await self.gate.wait()
        self.finished += 1
        return Proposal(kind="micro", base=(), prefix=[])

    def forget_session(self, session_id: str) -> None:
        return None


def _background(work: _GatedWork, slot: ServerSlot, session: str = "b") -> BackgroundWork:
    return BackgroundWork(_Session(session), (work,), sleep=asyncio.sleep, slot=slot)  # type: ignore[arg-type]


async def _let_others_run() -> None:
    """Give every ready task a few turns of the loop (the invariant checked after it holds
    whatever the timing: a task blocked on an event cannot move)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_turn_in_another_session_cancels_the_run_which_starts_over_after_it() -> None:
    slot = ServerSlot(1)
    work = _GatedWork()
    background = _background(work, slot)
    background.schedule()
    async with asyncio.timeout(WAIT_S):
        await work.started.wait()
    work.started.clear()
    with slot.user_turn():  # session a's turn begins: b's summary gives the server up
        await _let_others_run()
        assert slot.preempted == 1 and work.runs == 1 and work.finished == 0
        assert not work.started.is_set()  # nothing starts while a turn is in progress
        assert background.is_running  # ... but the work is not forgotten
    async with asyncio.timeout(WAIT_S):
        await work.started.wait()  # the idle gap: it starts over
    work.gate.set()
    async with asyncio.timeout(WAIT_S):
        await background.settle()
    assert work.runs == 2 and work.finished == 1 and background.ready is not None


async def test_work_waits_for_the_turn_in_progress_before_it_starts() -> None:
    slot = ServerSlot(1)
    work = _GatedWork()
    work.gate.set()
    background = _background(work, slot)
    with slot.user_turn():
        background.schedule()
        await _let_others_run()
        assert work.runs == 0
    async with asyncio.timeout(WAIT_S):
        await background.settle()
    assert work.runs == 1 and background.ready is not None


async def test_settling_during_a_turn_cancels_instead_of_waiting_for_it() -> None:
    """The turn would wait for the work and the work for the turn: the work goes (its choice
    is made again after the next reply)."""
    slot = ServerSlot(1)
    work = _GatedWork()
    background = _background(work, slot)
    background.schedule()
    async with asyncio.timeout(WAIT_S):
        await work.started.wait()
    with slot.user_turn():
        async with asyncio.timeout(WAIT_S):
            await background.settle()
    assert not background.is_running and background.ready is None and work.finished == 0


async def test_with_capacity_to_spare_a_turn_cancels_nothing() -> None:
    slot = ServerSlot(None)
    work = _GatedWork()
    background = _background(work, slot)
    background.schedule()
    async with asyncio.timeout(WAIT_S):
        await work.started.wait()
    with slot.user_turn():
        await _let_others_run()
        assert slot.preempted == 0 and background.is_running
        work.gate.set()
        async with asyncio.timeout(WAIT_S):
            await background.settle()
    assert work.runs == 1 and background.ready is not None
