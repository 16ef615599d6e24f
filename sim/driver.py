"""The replay's driver: feeds one prompt at a time, lets the user's idle gaps pass, measures turns.

`Driver.run` submits each scripted prompt through `gateway.run.GatewayRunner.submit` with a
collecting sink, lets the idle gap pass on the simulated clock (end-of-turn work runs in it, as it
would for real; none with `back_to_back`), and takes each turn's row just before the next message
arrives (so it includes the turn's background work), the last one once its end-of-turn work has
finished. In the `batch` mode (`sim.scenario.IN_TURN_AT_THRESHOLD`) the driver plays the anchor's
batch compaction: a message that finds the context at or past the threshold first waits for a
compaction (`AIAgent.compress(reason="threshold")`), in a task of its own named `turn-compaction`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, assert_never

from agent.errors import CompactionRefused
from agent.events import (
    AgentEvent,
    CompactionBegan,
    CompactionCommitted,
    EngineSwitched,
    ModelSwitched,
    NativeCompaction,
    SessionReloaded,
    ToolFinished,
    ToolStarted,
)
from sim.conversation import ScriptedTurn
from sim.llm_server import FakeLLM, ManualClock
from sim.meters import TaskTags, TimedModelCalls, TimedStore
from sim.model import SimModel
from sim.observe import is_micro_event, micro_outcomes
from sim.report import TurnRow, usage_of
from sim.simclock import Activity, Pump, SimSleep
from sim.waits import turn_timing

__all__ = ["CompactionLog", "Driver", "SimTime", "TURN_TIMEOUT_S", "mark"]

TURN_TIMEOUT_S = 120.0


@dataclass(slots=True)
class SimTime:
    """The simulated clock of one mode's run and what moves it."""

    clock: ManualClock
    activity: Activity
    sleep: SimSleep
    pump: Pump
    origin: float

    @classmethod
    def start(cls) -> SimTime:
        clock, activity = ManualClock(), Activity()
        sleep = SimSleep(clock, activity)
        return cls(clock, activity, sleep, Pump(sleep, activity, clock), clock())


@dataclass(slots=True)
class Mark:
    at: float
    busy_s: float
    latency_s: float
    store_s: float = 0.0
    client_s: float = 0.0


@dataclass(slots=True)
class CollectingSink:
    """A ReplySink that keeps the reply and the moment it was finished (wall and simulated)."""

    streams: ClassVar[bool] = True
    server: FakeLLM
    clock: ManualClock
    finished: Mark | None = None
    finished_at: float | None = None
    reply: str = ""
    notices: list[str] = field(default_factory=list)

    async def start(self, session_id: str) -> None:
        return None

    async def on_text(self, delta: str) -> None:
        return None

    async def notice(self, text: str) -> None:
        self.notices.append(text)

    async def finish(self, text: str) -> None:
        self.reply = text
        self.finished = mark(self.server)
        self.finished_at = self.clock()


@dataclass(slots=True)
class CompactionLog:
    """The agent's compaction events as intervals on the simulated clock (`on_event`); a
    commit also ends the committing task's summarizer job (`TaskTags.committed`)."""

    clock: ManualClock
    tags: TaskTags
    intervals: list[tuple[float, float]] = field(default_factory=list)
    _open: float | None = None

    def __call__(self, event: AgentEvent) -> None:
        match event:
            case CompactionBegan():
                self._open = self.clock()
            case CompactionCommitted() | NativeCompaction():
                now = self.clock()
                self.tags.committed()
                self.intervals.append((now if self._open is None else self._open, now))
                self._open = None
            case (
                SessionReloaded()
                | ModelSwitched()
                | EngineSwitched()
                | ToolStarted()
                | ToolFinished()
            ):
                return
            case unreachable:
                assert_never(unreachable)


def mark(server: FakeLLM, meters: tuple[TimedStore, TimedModelCalls] | None = None) -> Mark:
    store_s, client_s = (meters[0].spent_s, meters[1].spent_s) if meters else (0.0, 0.0)
    return Mark(
        at=time.perf_counter(),
        busy_s=server.busy_s,
        latency_s=server.latency_total_s,
        store_s=store_s,
        client_s=client_s,
    )


@dataclass(slots=True, kw_only=True)
class Pending:
    """A turn whose reply is out and whose row waits for the next message (or the end)."""

    turn: ScriptedTurn
    agent: Any
    begin: Mark
    reply: Mark
    arrived_at: float
    replied_at: float
    first_call: int
    first_event: int
    gap_s: float


@dataclass(slots=True, kw_only=True)
class Driver:
    """Feeds one prompt at a time, lets the idle gaps pass, and measures each turn."""

    runner: Any
    server: FakeLLM
    sim: SimTime
    events: list[dict[str, Any]]
    store: Any
    """The unwrapped store, for the driver's own bookkeeping reads."""
    meters: tuple[TimedStore, TimedModelCalls]
    compactions: CompactionLog
    replied_at: float
    """When the last reply went out, on the simulated clock: the idle gap starts there."""
    access: Any = None
    """The simulated user may call every simulated tool (the config only names real ones)."""
    compact_at_threshold: bool = False
    """Play the anchor's batch compaction: at or past the threshold, compact in the turn."""
    back_to_back: bool = False
    """No idle gaps: each message arrives when the previous reply is out."""
    billed_cache: bool = True
    """Rows count cache reads apart (False: every prompt token as input, as billed)."""
    session_id: str = ""
    threshold_tokens: int = 0
    _counters: tuple[int, int] = (0, 0)

    async def run(
        self, conversation: Sequence[ScriptedTurn], model: SimModel, done: Callable[[int], None]
    ) -> list[TurnRow]:
        rows: list[TurnRow] = []
        pending: Pending | None = None
        done(0)
        for turn in conversation:
            gap = 0.0 if self.back_to_back else turn.gap_s
            await self.sim.pump.idle_until(self.replied_at + gap)
            if pending is not None:
                rows.append(await self._row(pending, model, next_arrived=self.sim.clock()))
                done(len(rows))
            pending = await self._submit(turn, model, gap)
        if pending is not None:
            await self._settle(pending.agent)
            rows.append(await self._row(pending, model, next_arrived=math.inf))
            done(len(rows))
        return rows

    async def _submit(self, turn: ScriptedTurn, model: SimModel, gap: float) -> Pending:
        from gateway.platforms.base import ChatRef, InboundMessage

        message = InboundMessage(
            chat=ChatRef(platform="terminal", chat_id="replay"),
            user_id="sim-user",
            text=turn.user_text,
            is_direct=True,
        )
        sink = CollectingSink(self.server, self.sim.clock)
        first_call, first_event = len(model.calls), len(self.events)
        arrived_at, begin = self.sim.clock(), mark(self.server, self.meters)
        async with asyncio.timeout(TURN_TIMEOUT_S):
            if self.compact_at_threshold and self.session_id:
                await self._compact_at_threshold()
            outcome = await self.sim.pump.drive(
                self.runner.submit(message, sink, access=self.access)
            )
            if not outcome.session_id:  # the runner's error boundary answered for the turn
                failed = [e for e in self.events if e.get("event") == "turn_failed"]
                failure: Mapping[str, Any] = failed[-1] if failed else {}
                raise RuntimeError(
                    f"turn {turn.index} failed: {outcome.reply}\n{failure.get('exception', '')}"
                )
            self.session_id = outcome.session_id
            agent = await self.runner.agent_for(outcome.session_id)
        self.replied_at = self.sim.clock() if sink.finished_at is None else sink.finished_at
        return Pending(
            turn=turn,
            agent=agent,
            begin=begin,
            reply=sink.finished or mark(self.server, self.meters),
            arrived_at=arrived_at,
            replied_at=self.replied_at,
            first_call=first_call,
            first_event=first_event,
            gap_s=gap,
        )

    async def _compact_at_threshold(self) -> None:
        """The anchor's batch compaction: the message found the context at or past the
        threshold, so the user waits for a summary before the turn's first call."""
        agent = await self.runner.agent_for(self.session_id)
        if not agent.engine.should_compress(agent.transcript):
            return
        work = asyncio.create_task(
            agent.compress(reason="threshold"), name=f"turn-compaction:{self.session_id}"
        )
        try:
            await self.sim.pump.drive(work)
        except CompactionRefused:
            return  # the runtime said no (too little to fold); the turn carries on

    async def _settle(self, agent: Any) -> None:
        """The last turn's end-of-turn work, unless it still waits for its moment."""
        if not agent.background_waiting:
            async with asyncio.timeout(TURN_TIMEOUT_S):
                await self.sim.pump.drive(agent.wait_background())

    async def _row(self, p: Pending, model: SimModel, *, next_arrived: float) -> TurnRow:
        end = mark(self.server, self.meters)
        agent, begin, reply = p.agent, p.begin, p.reply
        info = await self.store.sessions.get_session(agent.session_id)
        batch, micro = info.compactions, info.micro_compactions
        fired = batch - self._counters[0]
        micro_count = micro - self._counters[1]
        self._counters = (batch, micro)
        engine = agent.engine
        self.threshold_tokens = int(getattr(engine, "threshold_tokens", 0) or 0)
        context = int(engine.current_tokens(agent.transcript))
        kinds = model.calls[p.first_call :]
        usages = [
            usage_of(u, billed_cache=self.billed_cache)
            for kind, u in zip(kinds, self.server.usages[p.first_call :], strict=True)
            if kind == "agent"
        ]
        latency_s = reply.latency_s - begin.latency_s
        micro_events = [e for e in self.events[p.first_event :] if is_micro_event(e)]
        outcomes = micro_outcomes(micro_events, micro_count)
        outcome = outcomes[-1] if outcomes else None
        timing = turn_timing(
            arrived_s=p.arrived_at,
            replied_s=p.replied_at,
            next_arrived_s=next_arrived,
            spans=self.meters[1].spans,
        )
        return TurnRow(
            turn=p.turn.index,
            kind=p.turn.kind,
            gap_s=p.gap_s,
            messages_active=len(agent.transcript),
            prompt_tokens=usages[-1].prompt_tokens if usages else 0,
            context_tokens=context,
            occupancy_pct=round(100 * context / max(1, self.threshold_tokens), 2),
            cache_read_tokens=sum(u.cache_read_tokens for u in usages),
            cache_write_tokens=sum(u.cache_write_tokens for u in usages),
            input_tokens=sum(u.input_tokens for u in usages),
            model_calls=len(usages),
            summary_calls=sum(1 for k in kinds if k == "summary"),
            micro=outcome,
            micro_outcomes=tuple(outcomes),
            micro_ms=round((end.at - reply.at) * 1000, 3) if outcome else 0.0,
            batch_compaction=fired > 0,
            compactions=fired,
            wait_ms=round((reply.at - begin.at - latency_s) * 1000, 3),
            latency_ms=round(latency_s * 1000, 3),
            overhead_ms=round(((end.at - begin.at) - (end.busy_s - begin.busy_s)) * 1000, 3),
            store_ms=round((end.store_s - begin.store_s) * 1000, 3),
            client_ms=round((end.client_s - begin.client_s) * 1000, 3),
            arrived_s=round(p.arrived_at - self.sim.origin, 3),
            response_s=timing.response_s,
            model_s=timing.model_s,
            compaction_wait_s=timing.compaction_wait_s,
            other_wait_s=timing.other_wait_s,
            blocking_compactions=timing.blocking_compactions,
            blocking_jobs=timing.blocking_jobs,
            summary_s=timing.summary_s,
        )
