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
