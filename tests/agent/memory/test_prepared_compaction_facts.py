"""Facts reach memory through a compaction prepared in the background, not only a blocking one.

Real agent, SQLite store, in-process fake models (`tests.agent.test_micro_compaction_harness`):
a batch compaction is prepared after a reply and swapped in at a later turn boundary
(`ProposalAdopter`); the facts its summary listed are kept, anchored, before it commits.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.memory.block import MEMORY_START
from agent.memory.facts import FACTS_CLOSE, FACTS_OPEN
from agent.memory.view import MemoryBackend
from agent.messages import content_text
from tests.agent.test_micro_compaction_harness import Summarizer, build_rig
from tests.fakes.provider import FakeProvider

OWNER = "http:alice"
FACT = "By the way, my cat is called Tiberius"


def _with_facts(prompt: str, n: int) -> str:
    """A summary whose facts section cites the row the fact was said in (if it is absorbed)."""
    row = re.search(r"\[user #(\d+)\]\n" + re.escape(FACT), prompt)
    facts = f"- Has a cat called Tiberius [#{row.group(1)}]" if row else "None"
    return f"## Goal\nrolling summary number {n}\n{FACTS_OPEN}\n{facts}\n{FACTS_CLOSE}"


async def test_a_prepared_compaction_keeps_the_facts_it_found(tmp_path: Path) -> None:
    """Thirty turns near an 8,000-token window: compactions are prepared in the background and
    adopted, no summary call inside a turn; the fact said in the third turn is then a note of
    the session's person, anchored to its row, never in a stored summary, and in the system
    message of that person's next session that asks about it."""
    aux = Summarizer(text_for=_with_facts)
    rig = await build_rig(tmp_path, summarizer=aux, micro_compact=False, speculative=True)
    config = CompressionConfig(
        protect_first_n=3, protect_last_n=4, target_ratio=0.05, micro_compact=False
    )
    provider = FakeProvider(responder=aux)
    rig.deps = dataclasses.replace(
        rig.deps,
        memory=MemoryBackend(store=rig.store.memory),
        engine_factory=lambda: ContextCompressor(
            config, summarizer=provider, summary_model="aux-model", ask_user_facts=True
        ),
    )
    rig.context_length = 8_000
    agent = await rig.new_session()
    await agent.memory.bind(OWNER)
    calls_in_turns = 0
    for i in range(30):  # the fact in the third turn: the first exchange is the kept head
        said = f"{FACT}. " if i == 2 else f"request {i} "
        before = len(aux.folds)
        await agent.run_turn(said + "pad " * 300)
        calls_in_turns += len(aux.folds) - before
        await agent.finalize_turn()
        await agent.wait_background()  # the idle gap: a compaction may be prepared here
    info = await rig.store.sessions.get_session(agent.session_id)
    notes = await rig.store.memory.list_memory(OWNER)
    rows = await rig.store.transcript.show(agent.session_id, include_archived=True)
    later = await rig.new_session()
    await later.memory.bind(OWNER)
    await later.run_turn("What is my cat called again?")
    await rig.store.aclose()
    assert info is not None and info.compactions >= 1 and calls_in_turns == 0
    assert [n.text for n in notes] == ["Has a cat called Tiberius"]
    source = [r for r in rows if r.get("_id") == notes[0].first_row_id]
    assert source and content_text(source[0]).startswith(FACT)
    assert all(FACTS_OPEN not in content_text(r) for r in rows)
    opening = content_text(later.transcript[0])
    assert MEMORY_START in opening and "Has a cat called Tiberius" in opening
