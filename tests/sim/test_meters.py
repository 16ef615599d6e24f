"""The replay's meters: a real provider's calls take their modeled seconds on the simulated
clock, by role, queued on a shared server; store calls are marked in flight for the pump."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.messages import system_message, user_message
from agent.providers.base import Provider, ProviderRequest, ProviderSettings, ToolSpec
from agent.providers.registry import build_provider
from sim.latency import RATE_PRESETS, LatencyModel
from sim.llm_server import FakeLLM, ManualClock, Turn
from sim.meters import TimedModelCalls, TimedStore
from sim.simclock import Activity, Pump, SimSleep
from state import SqlSessionStore

TOOL = ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})
MODEL = LatencyModel(name="test", main=RATE_PRESETS["hosted"], summarizer=RATE_PRESETS["local"])


def _request(*, tools: bool) -> ProviderRequest:
    return ProviderRequest(
        model="claude-sonnet-sim",
        messages=[system_message("You write summaries."), user_message("x" * 4_000)],
        tools=(TOOL,) if tools else (),
        max_tokens=512,
    )


def _provider(fake: FakeLLM) -> Provider:
    """The real Anthropic provider (SDK and all) against the fake server."""
    settings = ProviderSettings(
        provider="anthropic",
        model="claude-sonnet-sim",
        api_key="k",
        base_url=fake.url,
        max_retries=0,
    )
    return build_provider(settings)


async def _calls(fake: FakeLLM, model: LatencyModel) -> tuple[TimedModelCalls, Pump, ManualClock]:
    clock, activity = ManualClock(now=0.0), Activity()
    sleep = SimSleep(clock, activity)
    calls = TimedModelCalls(model, sleep=sleep, activity=activity, clock=clock, server=fake)
    return calls, Pump(sleep, activity, clock), clock


async def test_calls_take_their_modeled_seconds_by_role() -> None:
    """An agent call (tools offered) is timed at the main model's rates, a summary call (no
    tools) at the summarizer's; the clock ends where the usage says (Anthropic usage block:
    docs.anthropic.com/en/api/messages, `usage`)."""
    async with FakeLLM(clock=lambda: 0.0) as fake:
        fake.script(Turn(text="a" * 400), Turn(text="b" * 800))
        provider = _provider(fake)
        calls, pump, clock = await _calls(fake, MODEL)
        calls.install(provider, provider)
        try:
            main = await pump.drive(provider.complete(_request(tools=True)))
            after_main = clock()
            summary = await pump.drive(provider.complete(_request(tools=False)))
        finally:
            await provider.aclose()
    assert after_main == RATE_PRESETS["hosted"].seconds(main.usage) > 0
    assert clock() == after_main + RATE_PRESETS["local"].seconds(summary.usage)
    assert [s.role for s in calls.spans] == ["main", "summary"]
    assert main.usage.output_tokens == 100 and summary.usage.output_tokens == 200
    assert calls.spent_s > 0


async def test_a_shared_server_serves_one_call_at_a_time() -> None:
    """A summary and an agent call that reach one shared server together: the second waits for
    the first, so it ends after both durations."""
    shared = LatencyModel(
        name="shared",
        main=RATE_PRESETS["local"],
        summarizer=RATE_PRESETS["local"],
        shared_server=True,
    )
    async with FakeLLM(clock=lambda: 0.0) as fake:
        fake.script(Turn(text="s" * 400), Turn(text="m" * 400))
        provider = _provider(fake)
        calls, pump, clock = await _calls(fake, shared)
        calls.install(provider)
        try:
            await pump.drive(
                asyncio.gather(
                    provider.complete(_request(tools=False)),
                    provider.complete(_request(tools=True)),
                )
            )
        finally:
            await provider.aclose()
    first, second = calls.spans
    assert first.arrived_s == second.arrived_s == 0
    assert second.started_s == first.ended_s and clock() == second.ended_s
    assert second.ended_s == first.seconds + second.seconds


async def test_separate_capacity_serves_both_calls_at_once() -> None:
    """The same two calls with capacity of their own: both start when they arrive."""
    separate = LatencyModel(
        name="separate", main=RATE_PRESETS["local"], summarizer=RATE_PRESETS["local"]
    )
    async with FakeLLM(clock=lambda: 0.0) as fake:
        fake.script(Turn(text="s" * 400), Turn(text="m" * 400))
        provider = _provider(fake)
        calls, pump, clock = await _calls(fake, separate)
        calls.install(provider)
        try:
            await pump.drive(
                asyncio.gather(
                    provider.complete(_request(tools=False)),
                    provider.complete(_request(tools=True)),
                )
            )
        finally:
            await provider.aclose()
    assert [s.started_s for s in calls.spans] == [0, 0]
    assert clock() == max(s.seconds for s in calls.spans)


async def test_a_cancelled_holder_frees_the_slot_at_once() -> None:
    """Background work cancelled while its summary holds the one slot: the slot goes to the
    queued agent call at the moment of the cancel (the server stops when the client hangs up),
    and the summary's span ends there, marked cancelled."""
    shared = LatencyModel(
        name="shared",
        main=RATE_PRESETS["local"],
        summarizer=RATE_PRESETS["local"],
        shared_server=True,
    )
    async with FakeLLM(clock=lambda: 0.0) as fake:
        fake.script(Turn(text="s" * 4_000), Turn(text="m" * 40))
        provider = _provider(fake)
        calls, pump, clock = await _calls(fake, shared)
        calls.install(provider)

        async def user_turn(summary: asyncio.Task[object]) -> None:
            await pump_sleep(3.0)
            main = asyncio.ensure_future(provider.complete(_request(tools=True)))
            await pump_sleep(2.0)
            summary.cancel()  # a pending user request cancels the background summary
            await main

        pump_sleep = calls._sleep
        try:
            summary = asyncio.ensure_future(provider.complete(_request(tools=False)))
            await pump.drive(user_turn(summary))
        finally:
            await provider.aclose()
    held, served = calls.spans
    assert held.role == "summary" and held.cancelled and held.ended_s == 5.0
    assert served.role == "main" and served.arrived_s == 3.0 and served.started_s == 5.0
    assert clock() == served.ended_s == 5.0 + served.seconds


async def test_summary_calls_are_grouped_into_jobs_by_task_and_commit() -> None:
    """One task's summary calls are one job until it commits a compaction; another task's
    calls are another job; the agent's own calls belong to none."""
    async with FakeLLM(clock=lambda: 0.0) as fake:
        fake.script(*(Turn(text="x" * 40) for _ in range(5)))
        provider = _provider(fake)
        calls, pump, _ = await _calls(fake, MODEL)
        calls.install(provider)

        async def in_turn() -> None:
            await provider.complete(_request(tools=True))
            await provider.complete(_request(tools=False))
            await provider.complete(_request(tools=False))
            calls.tags.committed()
            await provider.complete(_request(tools=False))

        async def background() -> None:
            await provider.complete(_request(tools=False))

        try:
            await pump.drive(asyncio.create_task(in_turn(), name="turn:terminal:replay"))
            await pump.drive(asyncio.create_task(background(), name="end-of-turn:s1"))
        finally:
            await provider.aclose()
    assert [s.job for s in calls.spans] == [-1, 0, 0, 1, 2]
    assert [s.origin for s in calls.spans] == ["turn"] * 4 + ["end-of-turn"]
    assert calls.tags.job_origins == {0: "turn", 1: "turn", 2: "end-of-turn"}


async def test_store_calls_are_timed_and_marked_in_flight(tmp_path: Path) -> None:
    """A real store call through the proxy adds wall time and tells the pump it began and ended."""
    activity = Activity()
    raw = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 's.db'}")
    store = TimedStore(raw, activity)
    try:
        before = activity.version
        stats = await store.sessions.stats()
    finally:
        await raw.aclose()
    assert stats["active_messages"] == 0
    assert activity.version == before + 2 and activity.in_flight == 0
    assert store.spent_s > 0
