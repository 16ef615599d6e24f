"""The store is the truth: an agent counts its own writes, reloads when another writer moved the
session, and never commits a compaction computed from a transcript that is no longer stored.

Two agents on one session stand for two workers (one store, as in one process, or two).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.errors import CompactionRefused
from agent.messages import user_message
from agent.micro_compaction import MicroCompaction
from agent.session_meta import write_model
from tests.agent.test_micro_compaction_harness import Rig, Summarizer, build_rig, turn, user_texts


async def _version(rig: Rig, session_id: str) -> int:
    info = await rig.store.sessions.get_session(session_id)
    assert info is not None
    return info.version


async def test_an_agent_alone_stays_in_step_and_never_reloads(tmp_path: Path) -> None:
    """Turns with tool calls, micro passes and a manual compaction: the agent's count of its own
    writes equals the stored version throughout, so a sync finds nothing to reload."""
    rig = await build_rig(tmp_path, tool_rounds=1)
    agent = await rig.new_session()
    for i in range(8):
        await turn(agent, f"request {i}")
        assert agent.known_version == await _version(rig, agent.session_id)
        assert await agent.sync_with_store() is False
    assert rig.summarizer.folds, "the micro passes must have run"
    await agent.compress(reason="manual")
    await write_model(rig.store.meta, agent.session_id, None)  # meta writes do not move the version
    assert agent.known_version == await _version(rig, agent.session_id)
    assert await agent.sync_with_store() is False
    await rig.store.aclose()


async def test_another_workers_turn_is_seen_by_the_next_sync(tmp_path: Path) -> None:
    """After another worker's turn, the agent adopts the stored active set: the next request
    carries that turn."""
    rig = await build_rig(tmp_path, micro_compact=False)
    mine = await rig.new_session()
    theirs = await rig.open(mine.session_id)
    await turn(mine, "from worker one")
    assert await theirs.sync_with_store() is True
    await turn(theirs, "from worker two")
    assert await mine.sync_with_store() is True
    assert [m["_id"] for m in mine.transcript] == [
        m["_id"] for m in await rig.store.transcript.load_active(mine.session_id)
    ]
    await turn(mine, "back on worker one")
    main_requests = rig.deps.provider.requests  # type: ignore[attr-defined]
    assert user_texts(main_requests[-1].messages) == [
        "from worker one",
        "from worker two",
        "back on worker one",
    ]
    await rig.store.aclose()


async def test_a_model_switched_on_another_worker_is_adopted(tmp_path: Path) -> None:
    """`/model` elsewhere only writes meta; the next sync still switches this agent's model."""
    rig = await build_rig(tmp_path, micro_compact=False)
    agent = await rig.new_session()
    await write_model(rig.store.meta, agent.session_id, "other-model")
    assert await agent.sync_with_store() is False
    assert agent.model == "other-model"
    await rig.store.aclose()


async def test_a_compaction_of_a_stale_transcript_is_refused_and_reloads(tmp_path: Path) -> None:
    """A write the agent did not see (its lock was lost) makes its compaction fail cleanly: the
    store is untouched, the agent now holds the stored set, and compacting again works."""
    rig = await build_rig(tmp_path, micro_compact=False)
    agent = await rig.new_session()
    for i in range(16):
        await turn(agent, f"request {i}")
    await rig.store.transcript.append(agent.session_id, [user_message("written elsewhere")])
    before = await rig.store.transcript.show(agent.session_id, include_archived=True)
    with pytest.raises(CompactionRefused, match="another worker"):
        await agent.compress(reason="manual")
    assert await rig.store.transcript.show(agent.session_id, include_archived=True) == before
    assert user_texts(agent.transcript)[-1] == "written elsewhere"
    await agent.compress(reason="manual")
    assert agent.known_version == await _version(rig, agent.session_id)
    await rig.store.aclose()


class _GatedSummarizer(Summarizer):
    """Summaries wait for the test: another worker can act while a pass is in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def gated(self, request: object) -> str:
        self.called.set()
        await self.release.wait()
        return self(request)  # type: ignore[arg-type]


@pytest.mark.parametrize("elsewhere", ["turn_running", "turn_done"])
async def test_a_micro_pass_overtaken_by_another_worker_is_discarded(
    tmp_path: Path, elsewhere: str
) -> None:
    """While a pass summarises, another worker runs a turn (still holding the session's lock,
    or already done): the pass commits nothing, and the stored session is the other's."""
    gate = _GatedSummarizer()
    rig = await build_rig(tmp_path)
    agent = await rig.new_session()
    for i in range(6):
        await turn(agent, f"request {i}")
    gated = MicroCompaction(
        rig.deps.config.compression,
        summarizer=type(rig.micro._summarizer)(responder=gate.gated),
        summary_model="aux-model",
    )
    agent = await rig.open(agent.session_id, micro=gated)
    other = await rig.open(agent.session_id)
    await agent.run_turn("the pass folds after this")
    await agent.finalize_turn()
    async with asyncio.timeout(5):
        await gate.called.wait()
    micro_before = (await rig.store.sessions.get_session(agent.session_id)).micro_compactions  # type: ignore[union-attr]
    async with rig.store.locks.lock_session(agent.session_id, timeout_s=1):
        await other.sync_with_store()
        await other.run_turn("the other worker's turn")
        if elsewhere == "turn_running":
            gate.release.set()
            await agent.wait_background()
    if elsewhere == "turn_done":
        gate.release.set()
        await agent.wait_background()
    info = await rig.store.sessions.get_session(agent.session_id)
    assert info is not None and info.micro_compactions == micro_before
    stored = await rig.store.transcript.load_active(agent.session_id)
    assert user_texts(stored)[-2:] == ["the pass folds after this", "the other worker's turn"]
    assert await agent.sync_with_store() is True
    assert [m["_id"] for m in agent.transcript] == [m["_id"] for m in stored]
    await rig.store.aclose()
