"""Invariant: batch compactions and micro passes interleaved never lose or duplicate a row."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from agent.errors import CompactionRefused
from agent.messages import is_real_user_message
from tests.agent.test_micro_compaction_harness import build_rig, markers, turn


async def test_interleaved_batch_and_micro_keep_every_row_once(tmp_path: Path) -> None:
    """Every user and assistant message is stored exactly once; the active rows are the transcript."""
    rig = await build_rig(tmp_path, tool_rounds=1)
    agent = await rig.new_session()
    batches = 0
    for i in range(30):
        await turn(agent, f"request {i}")
        if i % 6 == 5:
            try:
                await agent.compress(reason="manual")
                batches += 1
            except CompactionRefused:
                pass
        active = await rig.store.transcript.load_active(agent.session_id)
        assert [m["_id"] for m in active] == [m["_id"] for m in agent.transcript]
        assert markers(active)[0] <= 1  # never more than one micro marker
    every = await rig.store.transcript.show(agent.session_id, include_archived=True)
    texts = Counter(
        str(m["content"]) for m in every if is_real_user_message(m) or m.get("role") == "assistant"
    )
    for i in range(30):
        assert texts[f"request {i}"] == 1
        assert sum(n for t, n in texts.items() if t.startswith(f"answer to request {i}:")) == 1
    info = await rig.store.sessions.get_session(agent.session_id)
    assert info is not None and info.active_messages == len(agent.transcript)
    assert batches >= 2 and info.compactions == batches and info.micro_compactions >= 10
    assert len(every) == info.total_messages
    await rig.store.aclose()
