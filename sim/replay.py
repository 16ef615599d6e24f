"""The long-session replay: a seeded conversation through the real runtime, runner and store.

For each mode it starts a `cli.runtime.Runtime` against the sim server (Anthropic wire, prompt
cache on a simulated clock), feeds every prompt through `gateway.run.GatewayRunner.submit` with a
collecting sink, waits for end-of-turn work (micro-compaction) as the idle gap would, and measures
each turn. Nothing here decides anything about compaction: it only drives and observes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from agent.config import HermesConfig, PriceEntry, parse_config
from agent.pricing import price_for
from sim.conversation import ScriptedTurn, generate_conversation
from sim.llm_server import FakeLLM, ManualClock
from sim.meters import TimedProvider, TimedStore
from sim.model import SimModel
from sim.observe import capture_events, check_findable, is_micro_event, micro_outcome
from sim.report import CallRecord, TurnRow, row_dict, summarize_mode, usage_of
from sim.tools import sim_tool_registry

__all__ = [
    "MODES",
    "SIM_MODEL",
    "ReplayOptions",
    "build_config",
    "load_price_table",
    "run_replay",
]

MODES = ("batch", "micro-always", "micro-cold")
SIM_MODEL = "claude-sonnet-sim"
"""A Claude-shaped name (so caching applies and the sonnet price matches) that no API serves."""
SIM_API_KEY = "sim-offline-key"
TURN_TIMEOUT_S = 120.0


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
            "micro_compact": mode != "batch",
            "micro_compact_when": "always" if mode == "micro-always" else "cold",
        },
        "state": {"url": db_url},
        "tools": {"approval": "deny"},
        "prompt_caching": {"enabled": options.caching, "cache_ttl": options.cache_ttl},
    }
    if options.prices is not None:
        data["pricing"] = {k: v.model_dump() for k, v in options.prices.items()}
    return parse_config(data, path="<replay>")


async def run_replay(options: ReplayOptions, modes: Sequence[str], workdir: Path) -> dict[str, Any]:
    """Replay the conversation once per mode; the JSON-ready result."""
    conversation = generate_conversation(seed=options.seed, turns=options.turns)
    results: dict[str, Any] = {}
    for mode in modes:
        results[mode] = await _replay_mode(options, mode, conversation, workdir / mode)
    return {
        "options": {
            "turns": options.turns,
            "context_window": options.context_window,
            "seed": options.seed,
            "latency_ms": options.latency_ms,
            "model": options.model,
            "caching": options.caching,
            "cache_ttl": options.cache_ttl,
        },
        "modes": {m: r["totals"] for m, r in results.items()},
        "turns": {m: r["turns"] for m, r in results.items()},
        "threshold_tokens": {m: r["threshold_tokens"] for m, r in results.items()},
    }


def _instrument(runtime: Any, server: FakeLLM, seed: int) -> tuple[TimedStore, TimedProvider]:
    """Swap in the simulated tools, and stopwatches around the store and the main provider."""
    store = TimedStore(runtime.store)
    provider = TimedProvider(runtime.deps.provider, server)
    context = replace(runtime.deps.tool_context, services={"store": store})
    runtime.store = store
    runtime.deps = replace(
        runtime.deps,
        tools=sim_tool_registry(seed),
        store=store,
        provider=provider,
        tool_context=context,
    )
    return store, provider


@dataclass(slots=True)
class _Mark:
    at: float
    busy_s: float
    latency_s: float
    store_s: float = 0.0
    client_s: float = 0.0


@dataclass(slots=True)
class _CollectingSink:
    """A ReplySink that keeps the reply and the moment it was finished."""

    streams: ClassVar[bool] = True
    server: FakeLLM
    finished: _Mark | None = None
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


def _mark(server: FakeLLM, meters: tuple[TimedStore, TimedProvider] | None = None) -> _Mark:
    store_s, client_s = (meters[0].spent_s, meters[1].spent_s) if meters else (0.0, 0.0)
    return _Mark(
        at=time.perf_counter(),
        busy_s=server.busy_s,
        latency_s=server.latency_total_s,
        store_s=store_s,
        client_s=client_s,
    )


async def _replay_mode(
    options: ReplayOptions, mode: str, conversation: Sequence[ScriptedTurn], workdir: Path
) -> dict[str, Any]:
    from cli.runtime import Runtime
    from gateway.run import GatewayRunner

    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    clock = ManualClock()
    model = SimModel(conversation)
    server = FakeLLM(
        responder=model,
        clock=clock,
        latency_s=options.latency_ms / 1000,
        record_bodies=False,
    )
    started = time.perf_counter()
    with capture_events() as events:
        async with server:
            db_url = f"sqlite+aiosqlite:///{workdir / 'state.db'}"
            config = build_config(mode, options, base_url=server.url, db_url=db_url)
            sim_sleep = SimSleep(clock)
            runtime = await Runtime.start(config, workdir, {}, clock=clock, sleep=sim_sleep)
            raw_store = runtime.store
            try:
                store, provider = _instrument(runtime, server, options.seed)
                runner = GatewayRunner(runtime)
                drive = _Driver(
                    runner=runner,
                    server=server,
                    clock=clock,
                    sleep=sim_sleep,
                    events=events,
                    store=raw_store,
                    meters=(store, provider),
                )
                rows = [await drive.turn(t, model) for t in conversation]
                await runner.stop(timeout_s=TURN_TIMEOUT_S)
                stats = await raw_store.stats()
                findable = await check_findable(raw_store, drive.session_id, conversation)
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
        wall_s=time.perf_counter() - started,
    )
    return {"totals": totals, "turns": [row_dict(r) for r in rows], "threshold_tokens": threshold}


@dataclass(slots=True)
class _Driver:
    """Feeds one prompt at a time and measures it."""

    runner: Any
    server: FakeLLM
    clock: ManualClock
    sleep: SimSleep
    events: list[dict[str, Any]]
    store: Any
    """The unwrapped store, for the driver's own bookkeeping reads."""
    meters: tuple[TimedStore, TimedProvider]
    session_id: str = ""
    threshold_tokens: int = 0
    _counters: tuple[int, int] = (0, 0)

    async def turn(self, turn: ScriptedTurn, model: SimModel) -> TurnRow:
        from gateway.platforms.base import ChatRef, InboundMessage

        await self._idle(turn.gap_s)
        message = InboundMessage(
            chat=ChatRef(platform="terminal", chat_id="replay"),
            user_id="sim-user",
            text=turn.user_text,
            is_direct=True,
        )
        sink = _CollectingSink(self.server)
        first_call, first_event = len(model.calls), len(self.events)
        begin = _mark(self.server, self.meters)
        async with asyncio.timeout(TURN_TIMEOUT_S):
            outcome = await self.runner.submit(message, sink)
            self.session_id = outcome.session_id
            agent = await self.runner.agent_for(outcome.session_id)
            if not agent.background_waiting:  # a pass due now belongs to this turn
                await agent.wait_background()
        end = _mark(self.server, self.meters)
        reply = sink.finished or end
        return await self._row(turn, agent, model, (begin, reply, end), first_call, first_event)

    async def _idle(self, gap_s: float) -> None:
        """The user's idle gap on the simulated clock: the server's cache ages, and end-of-turn
        work waiting for a cold cache runs if the gap outlasts its wait (as it would for real)."""
        if not self.sleep.advance(gap_s) or not self.session_id:
            return
        agent = await self.runner.agent_for(self.session_id)
        for _ in range(3):  # let the woken task take its first step (asyncio order is fixed)
            await asyncio.sleep(0)
        await agent.wait_background()

    async def _row(
        self,
        turn: ScriptedTurn,
        agent: Any,
        model: SimModel,
        marks: tuple[_Mark, _Mark, _Mark],
        first_call: int,
        first_event: int,
    ) -> TurnRow:
        begin, reply, end = marks
        info = await self.store.get_session(agent.session_id)
        batch, micro = info.compactions, info.micro_compactions
        fired = batch > self._counters[0]
        micro_count = micro - self._counters[1]
        self._counters = (batch, micro)
        engine = agent.engine
        self.threshold_tokens = int(getattr(engine, "threshold_tokens", 0) or 0)
        context = int(engine.current_tokens(agent.transcript))
        usages = [
            usage_of(u)
            for kind, u in zip(
                model.calls[first_call:], self.server.usages[first_call:], strict=True
            )
            if kind == "agent"
        ]
        latency_s = reply.latency_s - begin.latency_s
        micro_events = [e for e in self.events[first_event:] if is_micro_event(e)]
        outcome = micro_outcome(micro_events, micro_count)
        return TurnRow(
            turn=turn.index,
            kind=turn.kind,
            gap_s=turn.gap_s,
            messages_active=len(agent.transcript),
            prompt_tokens=usages[-1].prompt_tokens if usages else 0,
            context_tokens=context,
            occupancy_pct=round(100 * context / max(1, self.threshold_tokens), 2),
            cache_read_tokens=sum(u.cache_read_tokens for u in usages),
            cache_write_tokens=sum(u.cache_write_tokens for u in usages),
            input_tokens=sum(u.input_tokens for u in usages),
            model_calls=len(usages),
            summary_calls=sum(1 for k in model.calls[first_call:] if k == "summary"),
            micro=outcome,
            micro_ms=round((end.at - reply.at) * 1000, 3) if outcome else 0.0,
            batch_compaction=fired,
            wait_ms=round((reply.at - begin.at - latency_s) * 1000, 3),
            latency_ms=round(latency_s * 1000, 3),
            overhead_ms=round(((end.at - begin.at) - (end.busy_s - begin.busy_s)) * 1000, 3),
            store_ms=round((end.store_s - begin.store_s) * 1000, 3),
            client_ms=round((end.client_s - begin.client_s) * 1000, 3),
        )


class SimSleep:
    """`asyncio.sleep` on the simulated clock: sleepers wake when `advance` passes their time."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    async def __call__(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._clock() + seconds, future)
        self._sleepers.append(entry)
        try:
            await future
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    def advance(self, seconds: float) -> int:
        """Move the clock on; wake every sleeper now due. Returns how many woke."""
        self._clock.advance(seconds)
        due = [e for e in self._sleepers if e[0] <= self._clock() and not e[1].done()]
        for _, future in due:
            future.set_result(None)
        return len(due)
