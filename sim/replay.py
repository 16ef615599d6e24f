"""The long-session replay: a seeded conversation through the real runtime, runner and store.

For each mode it starts a `cli.runtime.Runtime` against the sim server (Anthropic wire, prompt
cache on a simulated clock), feeds every prompt through `gateway.run.GatewayRunner.submit` with a
collecting sink, lets the user's idle gap pass on the simulated clock (end-of-turn work such as
micro-compaction runs in it, as it would for real), and measures each turn. Model calls take the
seconds of the latency model (`sim.latency`) on that clock, and `sim.simclock.Pump` moves it on;
`sim.waits` turns the calls' spans into what the user waited for. Nothing here decides anything
about compaction: it only drives and observes.

A turn's row is taken just before the next message arrives (after the idle gap, so it includes
the turn's background work), and for the last turn once its end-of-turn work has finished.

What runtime code must do to be measured: make model calls through `Runtime.provider` or
`Runtime.summarizer` (the meter is installed on those objects; `untimed_model_calls` in the totals
counts calls that bypassed it), wait through `AgentDeps.sleep` / `clock`, reach the store through
`AgentDeps.store`, and announce a compaction with the agent's `CompactionBegan` and
`CompactionCommitted` events (a compaction swapped in with no summary call inside that interval is
never blocking). Background work may run across turns: the pump interleaves it with the turns.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, assert_never

from agent.config import HermesConfig, PriceEntry, parse_config
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
from agent.pricing import price_for
from sim.conversation import ScriptedTurn, generate_conversation
from sim.latency import NO_LATENCY, LatencyModel
from sim.llm_server import FakeLLM, ManualClock
from sim.meters import CallSpan, TaskTags, TimedModelCalls, TimedStore
from sim.model import SimModel
from sim.observe import capture_events, check_findable, is_micro_event, micro_outcomes
from sim.probe import check_constraints, check_recall, sample_facts
from sim.report import CallRecord, TurnRow, row_dict, summarize_mode, usage_of
from sim.simclock import Activity, Pump, SimSleep
from sim.tools import sim_tool_registry
from sim.waits import turn_timing

__all__ = [
    "MODES",
    "SIM_MODEL",
    "ModeRun",
    "Progress",
    "ReplayOptions",
    "build_config",
    "load_price_table",
    "replay_mode",
    "run_replay",
]

MODES = ("batch", "speculative", "micro-always", "micro-cold", "lcm")
"""batch: the classic in-loop batch compaction only (no background work); speculative: batch
compaction prepared in the background ahead of the threshold; micro-always: that plus a fold
after every turn (the seed's cadence); micro-cold: the default config (prepared batch
compaction, folds only while the prompt cache is cold); lcm: the lossless engine plugin."""
SIM_MODEL = "claude-sonnet-sim"
"""A Claude-shaped name (so caching applies and the sonnet price matches) that no API serves."""
SIM_API_KEY = "sim-offline-key"
TURN_TIMEOUT_S = 120.0
Progress = Callable[[str, int, int], None]
"""Called with (mode, turns done, turns in all) after each turn."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayOptions:
    """What to replay and how."""

    turns: int = 500
    context_window: int = 128_000
    seed: int = 7
    latency_ms: float = 0.0
    prices: Mapping[str, PriceEntry] | None = None
    """None means the config's default price table."""
    model: str = SIM_MODEL
    caching: bool = True
    """prompt_caching.enabled; off makes every prompt token full price."""
    cache_ttl: str = "5m"
    latency: LatencyModel = NO_LATENCY
    """How long model calls take on the simulated clock (`sim.latency`); none: instant."""


def load_price_table(path: Path | None) -> dict[str, PriceEntry] | None:
    """A JSON price table ({model substring: {input, output, cache_write, cache_read}}), or None."""
    if path is None:
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return {key: PriceEntry(**value) for key, value in data.items()}


def build_config(mode: str, options: ReplayOptions, *, base_url: str, db_url: str) -> HermesConfig:
    """The HermesConfig of one mode: anthropic against the sim server, a SQLite store."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    data: dict[str, Any] = {
        "model": {
            "provider": "anthropic",
            "default": options.model,
            "base_url": base_url,
            "api_key": SIM_API_KEY,
            "context_length": options.context_window,
            "max_retries": 0,
            "timeout_s": 60,
        },
        "compression": {
            "micro_compact": mode in ("micro-always", "micro-cold"),
            "micro_compact_when": "always" if mode == "micro-always" else "cold",
            "speculative": mode != "batch",
        },
        "context": {"engine": "lcm" if mode == "lcm" else "compressor"},
        "state": {"url": db_url},
        "tools": {"approval": "deny"},
        "prompt_caching": {"enabled": options.caching, "cache_ttl": options.cache_ttl},
    }
    if options.prices is not None:
        data["pricing"] = {k: v.model_dump() for k, v in options.prices.items()}
    return parse_config(data, path="<replay>")


async def run_replay(
    options: ReplayOptions,
    modes: Sequence[str],
    workdir: Path,
    *,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Replay the conversation once per mode; the JSON-ready result."""
    conversation = generate_conversation(seed=options.seed, turns=options.turns)
    results: dict[str, Any] = {}
    for mode in modes:
        run = await replay_mode(options, mode, conversation, workdir / mode, on_progress)
        results[mode] = run.json()
    return {
        "options": {
            "turns": options.turns,
            "context_window": options.context_window,
            "seed": options.seed,
            "latency_ms": options.latency_ms,
            "model": options.model,
            "caching": options.caching,
            "cache_ttl": options.cache_ttl,
            "latency_model": options.latency.describe(),
        },
        "modes": {m: r["totals"] for m, r in results.items()},
        "turns": {m: r["turns"] for m, r in results.items()},
        "threshold_tokens": {m: r["threshold_tokens"] for m, r in results.items()},
    }


@dataclass(slots=True)
class _SimTime:
    """The simulated clock of one mode's run and what moves it."""

    clock: ManualClock
    activity: Activity
    sleep: SimSleep
    pump: Pump
    origin: float

    @classmethod
    def start(cls) -> _SimTime:
        clock, activity = ManualClock(), Activity()
        sleep = SimSleep(clock, activity)
        return cls(clock, activity, sleep, Pump(sleep, activity, clock), clock())


def _instrument(
    runtime: Any, server: FakeLLM, options: ReplayOptions, sim: _SimTime, tags: TaskTags
) -> tuple[TimedStore, TimedModelCalls]:
    """Swap in the simulated tools, and meters around the store and every model call (the
    provider objects themselves: the agent's, and the summarizer the engine and micro hold)."""
    store = TimedStore(runtime.store, sim.activity)
    calls = TimedModelCalls(
        options.latency,
        sleep=sim.sleep,
        activity=sim.activity,
        clock=sim.clock,
        server=server,
        tags=tags,
    )
    calls.install(runtime.provider, runtime.summarizer)
    context = replace(runtime.deps.tool_context, services={"store": store})
    runtime.store = store
    runtime.deps = replace(
        runtime.deps,
        tools=sim_tool_registry(options.seed),
        store=store,
        tool_context=context,
    )
    return store, calls


@dataclass(slots=True)
class _Mark:
    at: float
    busy_s: float
    latency_s: float
    store_s: float = 0.0
    client_s: float = 0.0


@dataclass(slots=True)
class _CollectingSink:
    """A ReplySink that keeps the reply and the moment it was finished (wall and simulated)."""

    streams: ClassVar[bool] = True
    server: FakeLLM
    clock: ManualClock
    finished: _Mark | None = None
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
        self.finished = _mark(self.server)
        self.finished_at = self.clock()


@dataclass(slots=True)
class _CompactionLog:
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


def _mark(server: FakeLLM, meters: tuple[TimedStore, TimedModelCalls] | None = None) -> _Mark:
    store_s, client_s = (meters[0].spent_s, meters[1].spent_s) if meters else (0.0, 0.0)
    return _Mark(
        at=time.perf_counter(),
        busy_s=server.busy_s,
        latency_s=server.latency_total_s,
        store_s=store_s,
        client_s=client_s,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeRun:
    """One mode's replay: its rows and totals, and the model calls on the simulated clock."""

    totals: dict[str, Any]
    rows: list[TurnRow]
    threshold_tokens: int
    spans: list[CallSpan]
    """Every model call on the simulated clock, in the order the server began on them."""
    origin_s: float
    """The simulated clock's reading when the session began (rows count from it; spans do not)."""

    def json(self) -> dict[str, Any]:
        return {
            "totals": self.totals,
            "turns": [row_dict(r) for r in self.rows],
            "threshold_tokens": self.threshold_tokens,
        }


async def replay_mode(
    options: ReplayOptions,
    mode: str,
    conversation: Sequence[ScriptedTurn],
    workdir: Path,
    on_progress: Progress | None = None,
) -> ModeRun:
    """Replay `conversation` in one mode through a fresh runtime, runner and store."""
    from cli.runtime import Runtime
    from gateway.run import GatewayRunner

    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    sim = _SimTime.start()
    model = SimModel(conversation)
    server = FakeLLM(
        responder=model,
        clock=sim.clock,
        latency_s=options.latency_ms / 1000,
        record_bodies=False,
    )
    tags = TaskTags()
    compactions = _CompactionLog(sim.clock, tags)
    started = time.perf_counter()
    with capture_events() as events:
        async with server:
            db_url = f"sqlite+aiosqlite:///{workdir / 'state.db'}"
            config = build_config(mode, options, base_url=server.url, db_url=db_url)
            runtime = await Runtime.start(
                config, workdir, {}, clock=sim.clock, sleep=sim.sleep, on_event=compactions
            )
            raw_store = runtime.store
            try:
                meters = _instrument(runtime, server, options, sim, tags)
                runner = GatewayRunner(runtime)
                drive = _Driver(
                    runner=runner,
                    server=server,
                    sim=sim,
                    events=events,
                    store=raw_store,
                    meters=meters,
                    compactions=compactions,
                    access=_operator_access(runtime),
                    replied_at=sim.origin,
                )
                rows = await drive.run(
                    conversation,
                    model,
                    lambda n: _progress(on_progress, mode, n, len(conversation)),
                )
                await runner.stop(timeout_s=TURN_TIMEOUT_S)
                stats = await raw_store.sessions.stats()
                findable = await check_findable(raw_store, drive.session_id, conversation)
                archive = await _probe_archive(
                    runner, raw_store, drive.session_id, conversation, mode, options.seed
                )
                threshold = drive.threshold_tokens
            finally:
                runtime.store = raw_store
                await runtime.aclose()
    price = price_for(options.model, config.pricing)
    if price is None:
        raise ValueError(f"the price table has no entry matching {options.model!r}")
    calls = [
        CallRecord(kind=kind, usage=usage_of(raw))
        for kind, raw in zip(model.calls, server.usages, strict=True)
    ]
    totals = summarize_mode(
        rows,
        calls=calls,
        price=price,
        store_rows={
            "active": stats["active_messages"],
            "archived": stats["archived_messages"],
            "summaries": stats["summary_messages"],
        },
        findable=findable,
        archive=archive,
        wall_s=time.perf_counter() - started,
    )
    # A call the meter never saw took no simulated time: the waits would be understated.
    totals["untimed_model_calls"] = len(server.usages) - len(meters[1].spans)
    return ModeRun(
        totals=totals,
        rows=rows,
        threshold_tokens=threshold,
        spans=meters[1].spans,
        origin_s=sim.origin,
    )


def _operator_access(runtime: Any) -> Any:
    from agent.access import Principal, TurnAccess

    tools = runtime.deps.tools.names()
    return TurnAccess(principal=Principal.operator(tools, can_approve=False))


async def _probe_archive(
    runner: Any,
    store: Any,
    session_id: str,
    conversation: Sequence[ScriptedTurn],
    mode: str,
    seed: int,
) -> dict[str, Any]:
    """The ledger and recall figures of the finished session (see `sim.probe`)."""
    agent = await runner.agent_for(session_id)
    facts = await sample_facts(store, session_id, conversation, seed)
    tool = "lcm_grep" if mode == "lcm" else "recall"
    return {
        "constraints": await check_constraints(store, session_id, conversation),
        "recall": await check_recall(agent.tools, store, session_id, facts, tool=tool),
    }


def _progress(on_progress: Progress | None, mode: str, done: int, total: int) -> None:
    if on_progress is not None:
        on_progress(mode, done, total)


@dataclass(slots=True, kw_only=True)
class _Pending:
    """A turn whose reply is out and whose row waits for the next message (or the end)."""

    turn: ScriptedTurn
    agent: Any
    begin: _Mark
    reply: _Mark
    arrived_at: float
    replied_at: float
    first_call: int
    first_event: int


@dataclass(slots=True, kw_only=True)
class _Driver:
    """Feeds one prompt at a time, lets the idle gaps pass, and measures each turn."""

    runner: Any
    server: FakeLLM
    sim: _SimTime
    events: list[dict[str, Any]]
    store: Any
    """The unwrapped store, for the driver's own bookkeeping reads."""
    meters: tuple[TimedStore, TimedModelCalls]
    compactions: _CompactionLog
    replied_at: float
    """When the last reply went out, on the simulated clock: the idle gap starts there."""
    access: Any = None
    """The simulated user may call every simulated tool (the config only names real ones)."""
    session_id: str = ""
    threshold_tokens: int = 0
    _counters: tuple[int, int] = (0, 0)

    async def run(
        self, conversation: Sequence[ScriptedTurn], model: SimModel, done: Callable[[int], None]
    ) -> list[TurnRow]:
        rows: list[TurnRow] = []
        pending: _Pending | None = None
        done(0)
        for turn in conversation:
            await self.sim.pump.idle_until(self.replied_at + turn.gap_s)
            if pending is not None:
                rows.append(await self._row(pending, model, next_arrived=self.sim.clock()))
                done(len(rows))
            pending = await self._submit(turn, model)
        if pending is not None:
            await self._settle(pending.agent)
            rows.append(await self._row(pending, model, next_arrived=math.inf))
            done(len(rows))
        return rows

    async def _submit(self, turn: ScriptedTurn, model: SimModel) -> _Pending:
        from gateway.platforms.base import ChatRef, InboundMessage

        message = InboundMessage(
            chat=ChatRef(platform="terminal", chat_id="replay"),
            user_id="sim-user",
            text=turn.user_text,
            is_direct=True,
        )
        sink = _CollectingSink(self.server, self.sim.clock)
        first_call, first_event = len(model.calls), len(self.events)
        arrived_at, begin = self.sim.clock(), _mark(self.server, self.meters)
        async with asyncio.timeout(TURN_TIMEOUT_S):
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
        return _Pending(
            turn=turn,
            agent=agent,
            begin=begin,
            reply=sink.finished or _mark(self.server, self.meters),
            arrived_at=arrived_at,
            replied_at=self.replied_at,
            first_call=first_call,
            first_event=first_event,
        )

    async def _settle(self, agent: Any) -> None:
        """The last turn's end-of-turn work, unless it still waits for its moment."""
        if not agent.background_waiting:
            async with asyncio.timeout(TURN_TIMEOUT_S):
                await self.sim.pump.drive(agent.wait_background())

    async def _row(self, p: _Pending, model: SimModel, *, next_arrived: float) -> TurnRow:
        end = _mark(self.server, self.meters)
        agent, begin, reply = p.agent, p.begin, p.reply
        info = await self.store.sessions.get_session(agent.session_id)
        batch, micro = info.compactions, info.micro_compactions
        fired = batch > self._counters[0]
        micro_count = micro - self._counters[1]
        self._counters = (batch, micro)
        engine = agent.engine
        self.threshold_tokens = int(getattr(engine, "threshold_tokens", 0) or 0)
        context = int(engine.current_tokens(agent.transcript))
        kinds = model.calls[p.first_call :]
        usages = [
            usage_of(u)
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
            gap_s=p.turn.gap_s,
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
            batch_compaction=fired,
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
