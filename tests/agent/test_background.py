"""Background work never makes a turn wait, and what it proposes is adopted with catch-up.

Issue 14: "a new turn never waits for a running pass"; a batch compaction is "prepared in the
background ahead of the threshold from a snapshot and swapped in at a turn boundary (delta
catch-up)". Real agent, SQLite store, in-process fake models.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.compaction.markers import is_micro_marker
from agent.providers.base import ProviderRequest
from state import SqlSessionStore
from tests.agent.test_micro_compaction_harness import (
    Summarizer,
    build_rig,
    markers,
    turn,
    user_texts,
)
from tests.waits import WAIT_S


@dataclass
class GatedSummarizer:
    """The auxiliary model, held at a gate: a pass that has started but not finished."""

    inner: Summarizer = field(default_factory=Summarizer)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    calls: int = 0

    async def __call__(self, request: ProviderRequest) -> str:
        self.calls += 1
        self.started.set()
        await self.gate.wait()
        return self.inner(request)


async def test_a_turn_does_not_wait_for_a_running_pass_and_nothing_it_added_is_lost(
    tmp_path: Path,
) -> None:
    """A pass still running when the next message comes: the turn is answered at once; the
    pass's proposal is adopted at the following turn, keeping every message added meanwhile."""
    aux = GatedSummarizer()
    aux.gate.set()
    rig = await build_rig(tmp_path, summarizer=aux)  # type: ignore[arg-type]
    agent = await rig.new_session()
    for i in range(6):
        await turn(agent, f"request {i}")
    aux.gate.clear()
    aux.started.clear()
    await agent.run_turn("request 6")
    await agent.finalize_turn()
    async with asyncio.timeout(WAIT_S):
        await aux.started.wait()  # the pass is running, held at the gate
        result = await agent.run_turn("request 7")  # ... and this turn does not wait for it
    assert result.reply.startswith("answer to request 7")
    aux.gate.set()
    await agent.wait_background()
    before = markers(agent.transcript)
    await agent.run_turn("request 8")  # the proposal is adopted as this turn begins
    assert user_texts(agent.transcript) == [f"request {i}" for i in range(9)]
    assert markers(agent.transcript)[0] == 1 and before[0] == 1
    stored = await rig.store.transcript.load_active(agent.session_id)
    assert [m["_id"] for m in stored] == [m["_id"] for m in agent.transcript]
    await rig.store.aclose()


async def test_a_proposal_made_before_a_reload_is_dropped(tmp_path: Path) -> None:
    """Another worker wrote to the session meanwhile: the agent reloads the stored set, and a
    proposal computed from the old transcript is dropped, never adopted over the new one."""
    rig = await build_rig(tmp_path)
    agent = await rig.new_session()
    for i in range(6):
        await turn(agent, f"request {i}")
    await agent.run_turn("request 6")
    await agent.finalize_turn()
    await agent.wait_background()
    assert agent._background.ready is not None
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    async with await SqlSessionStore.open(url) as elsewhere:
        from agent.messages import user_message

        await elsewhere.transcript.append(agent.session_id, [user_message("from another worker")])
    assert await agent.sync_with_store()  # the version moved: reloaded
    assert agent._background.ready is None
    assert not await agent.proposals.adopt_ready()
    assert user_texts(agent.transcript)[-1] == "from another worker"
    await rig.store.aclose()


async def test_a_batch_compaction_is_prepared_after_the_reply_and_swapped_in_when_needed(
    tmp_path: Path,
) -> None:
    """Near the threshold the compaction's summary call runs after a reply, never inside a turn;
    it is swapped in at the boundary of the turn that would cross the threshold."""
    summary_calls_in_turns: list[int] = []
    aux = Summarizer()
    rig = await build_rig(
        tmp_path,
        summarizer=aux,
        micro_compact=False,
        speculative=True,
        context_length=8_000,  # a threshold of 6,000 tokens
    )
    agent = await rig.new_session()
    compactions = 0
    for i in range(30):
        calls_before = len(aux.folds) + len(aux.defrags)
        await agent.run_turn(f"request {i} " + "pad " * 300)
        summary_calls_in_turns.append(len(aux.folds) + len(aux.defrags) - calls_before)
        await agent.finalize_turn()
        await agent.wait_background()  # the idle gap
        info = await rig.store.sessions.get_session(agent.session_id)
        compactions = info.compactions if info else 0
    assert compactions >= 2
    assert sum(summary_calls_in_turns) == 0  # no turn ever waited for a summary
    assert agent.engine.current_tokens(agent.transcript) < agent.engine.threshold_tokens
    assert not any(is_micro_marker(m) for m in agent.transcript)
    await rig.store.aclose()


def _texts(messages: list[Any]) -> list[str]:
    return [str(m.get("content")) for m in messages]


async def test_a_deadline_around_settling_fires_and_the_running_pass_goes_on(
    tmp_path: Path,
) -> None:
    """Settling waits for a running pass, but never swallows its caller's cancellation: a
    0.1 s `asyncio.timeout` around it raises TimeoutError and the code after the wait does not
    run (the hygiene and shutdown deadlines rely on it). The pass itself is not cancelled by the
    caller's deadline: it finishes and its proposal is ready (issue 30)."""
    aux = GatedSummarizer()
    aux.gate.set()
    rig = await build_rig(tmp_path, summarizer=aux)  # type: ignore[arg-type]
    agent = await rig.new_session()
    for i in range(6):
        await turn(agent, f"request {i}")
    aux.gate.clear()
    aux.started.clear()
    await agent.run_turn("request 6")
    await agent.finalize_turn()
    async with asyncio.timeout(WAIT_S):
        await aux.started.wait()  # the pass is running, held at the gate
    ran_on = False
    try:
        async with asyncio.timeout(0.1):
            await agent.wait_background()
            ran_on = True
    except TimeoutError:
        timed_out = True
    else:
        timed_out = False
    assert (timed_out, ran_on) == (True, False)
    assert agent._background.is_running  # the caller's deadline did not cancel the pass
    aux.gate.set()
    async with asyncio.timeout(WAIT_S):
        await agent.wait_background()
    assert agent._background.ready is not None
    await rig.store.aclose()
