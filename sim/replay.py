"""The long-session replay: a seeded conversation through the real runtime, runner and store.

For each mode (`sim.scenario`) it starts a `cli.runtime.Runtime` against the sim server (the
route's wire: Anthropic with a prompt cache on a simulated clock, or OpenAI Chat Completions as a
local server), drives the conversation (`sim.driver`), and measures each turn. Model calls take
the seconds of the latency model (`sim.latency`) on that clock, queued on one server when the
capacity is shared (`sim.capacity`), and `sim.simclock.Pump` moves it on; `sim.waits` turns the
calls' spans into what the user waited for. Nothing here decides anything about compaction: it
only drives and observes (the `batch` mode's in-turn compaction calls the agent's own).

What runtime code must do to be measured: make model calls through `Runtime.provider` or
`Runtime.summarizer` (the meter is installed on those objects; `untimed_model_calls` in the totals
counts calls that bypassed it), wait through `AgentDeps.sleep` / `clock`, reach the store through
`AgentDeps.store`, and announce a committed compaction with the agent's `CompactionCommitted`
event (it closes the summarizer job of the task that committed; `sim.meters.TaskTags`).
Background work may run across turns: the pump interleaves it with the turns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.pricing import price_for
from sim.conversation import ScriptedTurn, generate_conversation
from sim.driver import TURN_TIMEOUT_S, CompactionLog, Driver, SimTime
from sim.llm_server import FakeLLM
from sim.meters import CallSpan, TaskTags, TimedModelCalls, TimedStore
from sim.model import SimModel
from sim.observe import capture_events, check_findable
from sim.probe import check_constraints, check_recall, sample_facts
from sim.report import (
    CallRecord,
    TurnRow,
    blocking_by_origin,
    peak_window_pct,
    row_dict,
    summarize_mode,
    usage_of,
)
from sim.scenario import (
    IN_TURN_AT_THRESHOLD,
    MODES,
    ROUTES,
    SIM_MODEL,
    ReplayOptions,
    assumptions,
    build_config,
    load_price_table,
)
from sim.tools import sim_tool_registry

__all__ = [
    "MODES",
    "ROUTES",
    "SIM_MODEL",
    "ModeRun",
    "Progress",
    "ReplayOptions",
    "build_config",
    "load_price_table",
    "replay_mode",
    "run_replay",
]

Progress = Callable[[str, int, int], None]
"""Called with (mode, turns done, turns in all) after each turn."""


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
        "options": assumptions(options),
        "modes": {m: r["totals"] for m, r in results.items()},
        "turns": {m: r["turns"] for m, r in results.items()},
        "threshold_tokens": {m: r["threshold_tokens"] for m, r in results.items()},
    }


def _instrument(
    runtime: Any, server: FakeLLM, options: ReplayOptions, sim: SimTime, tags: TaskTags
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
    sim = SimTime.start()
    model = SimModel(conversation)
    server = FakeLLM(
        responder=model,
        clock=sim.clock,
        latency_s=options.latency_ms / 1000,
        record_bodies=False,
    )
    tags = TaskTags()
    compactions = CompactionLog(sim.clock, tags)
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
                drive = Driver(
                    runner=runner,
                    server=server,
                    sim=sim,
                    events=events,
                    store=raw_store,
                    meters=meters,
                    compactions=compactions,
                    access=_operator_access(runtime),
                    replied_at=sim.origin,
                    compact_at_threshold=mode in IN_TURN_AT_THRESHOLD,
                    back_to_back=options.back_to_back,
                )
                drive.billed_cache = options.billed_cache
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
    price = price_for(options.price_model, config.pricing)
    if price is None:
        raise ValueError(f"the price table has no entry matching {options.price_model!r}")
    calls = [
        CallRecord(kind=kind, usage=usage_of(raw, billed_cache=options.billed_cache))
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
    totals["peak_window_pct"] = peak_window_pct(map(row_dict, rows), options.context_window)
    totals["blocking_by_origin"] = blocking_by_origin(rows, tags.job_origins)
    totals["cancelled_calls"] = sum(1 for s in meters[1].spans if s.cancelled)
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
