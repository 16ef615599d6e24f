"""End-of-turn work: off the reply's path, waits for a cold cache, cancelled by a new turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.agent import AgentDeps, AIAgent
from agent.compaction.micro_cadence import COLD_MARGIN_S, cold_delay_s
from agent.config import CompressionConfig, HermesConfig
from agent.context_compressor import ContextCompressor
from agent.tools.registry import ToolContext, ToolRegistry
from state import SqlSessionStore
from tests.fakes.provider import FakeProvider


class GatedSleep:
    """A sleep that ends only when the test says so: the idle gap is under the test's control."""

    def __init__(self) -> None:
        self.requested: list[float] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.requested.append(seconds)
        self.started.set()
        await self.release.wait()


class RecordingWork:
    def __init__(self, delay: float | None) -> None:
        self.delay = delay
        self.runs = 0
        self.finished = asyncio.Event()

    def delay_s(self, agent: AIAgent) -> float | None:
        return self.delay

    async def __call__(self, agent: AIAgent) -> None:
        self.runs += 1
        self.finished.set()

    def forget_session(self, session_id: str) -> None:
        pass


async def _agent(
    tmp_path: Path, work: RecordingWork, sleep: GatedSleep
) -> tuple[AIAgent, SqlSessionStore]:
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    config = HermesConfig()
    deps = AgentDeps(
        config=config,
        provider=FakeProvider(responder=lambda request: "ok"),
        store=store,
        engine_factory=lambda: ContextCompressor(
            config.compression, summarizer=FakeProvider(), summary_model="m"
        ),
        tools=ToolRegistry(),
        tool_context=ToolContext(session_id=""),
        end_of_turn=(work,),
        sleep=sleep,
    )
    info = await store.sessions.create_session()
    agent = await AIAgent.open(deps, session_id=info.id, model="m", context_length=100_000)
    return agent, store


async def test_a_new_turn_cancels_work_still_waiting(tmp_path: Path) -> None:
    """A turn that arrives before the cache goes cold cancels the waiting pass; it never runs."""
    work, sleep = RecordingWork(delay=301.0), GatedSleep()
    agent, store = await _agent(tmp_path, work, sleep)
    await agent.run_turn("one")
    await agent.finalize_turn()
    async with asyncio.timeout(5):
        await sleep.started.wait()
    assert sleep.requested == [301.0]
    await agent.run_turn("two")  # settles the background first
    assert work.runs == 0 and agent.is_idle()
    await store.aclose()


async def test_waiting_work_runs_once_the_gap_is_long_enough(tmp_path: Path) -> None:
    """When the idle gap outlasts the delay, the pass runs and the next turn waits for it."""
    work, sleep = RecordingWork(delay=301.0), GatedSleep()
    agent, store = await _agent(tmp_path, work, sleep)
    await agent.run_turn("one")
    await agent.finalize_turn()
    sleep.release.set()
    async with asyncio.timeout(5):
        await work.finished.wait()
    await agent.run_turn("two")
    assert work.runs == 1
    await store.aclose()


async def test_immediate_work_is_waited_for_not_cancelled(tmp_path: Path) -> None:
    """Work due now is running from the start: settling waits for it instead of dropping it."""
    work, sleep = RecordingWork(delay=0.0), GatedSleep()
    agent, store = await _agent(tmp_path, work, sleep)
    await agent.run_turn("one")
    await agent.finalize_turn()
    await agent.wait_background()
    assert work.runs == 1 and sleep.requested == []
    await store.aclose()


async def test_work_that_declines_is_not_scheduled(tmp_path: Path) -> None:
    """A delay of None means no work this turn: nothing is scheduled."""
    work, sleep = RecordingWork(delay=None), GatedSleep()
    agent, store = await _agent(tmp_path, work, sleep)
    await agent.run_turn("one")
    await agent.finalize_turn()
    assert agent.is_idle() and work.runs == 0
    await store.aclose()


@pytest.mark.parametrize(
    ("when", "last", "ttl", "tokens", "expected"),
    [
        ("always", 1000.0, 300.0, 0, 0.0),
        ("cold", 1000.0, None, 0, 0.0),  # no caching: the cache is always cold
        ("cold", None, 300.0, 0, 0.0),  # nothing cached yet
        ("cold", 1000.0, 300.0, 0, 300.0 - 10.0 + COLD_MARGIN_S),  # warm: wait out the TTL
        ("cold", 600.0, 300.0, 0, 0.0),  # already cold
        ("cold", 1000.0, 300.0, 60_000, 0.0),  # occupancy past the trigger: fold now
        ("cold", 1000.0, 3600.0, 0, 3600.0 - 10.0 + COLD_MARGIN_S),
    ],
)
def test_cold_delay(
    when: str, last: float | None, ttl: float | None, tokens: int, expected: float
) -> None:
    """`cold` folds at once when rewriting the prefix is free, else when the TTL runs out."""
    delay = cold_delay_s(
        when=when,
        now=1010.0,
        last_request_at=last,
        cache_ttl_s=ttl,
        tokens=tokens,  # type: ignore[arg-type]
        threshold_tokens=100_000,
        occupancy_trigger=0.6,
    )
    assert delay == pytest.approx(expected)


def test_micro_compaction_is_off_when_disabled() -> None:
    """compression.micro_compact false: no work is ever scheduled."""
    from agent.micro_compaction import MicroCompaction

    micro = MicroCompaction(
        CompressionConfig(micro_compact=False), summarizer=FakeProvider(), summary_model="m"
    )
    assert micro.delay_s(object()) is None  # type: ignore[arg-type]
