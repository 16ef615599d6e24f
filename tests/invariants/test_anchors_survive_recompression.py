"""Anchors survive iterative re-compression: whatever the summarizer does to them, every row
batch and micro compaction archived stays cited by the active summaries and recallable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.archive.anchors import Anchor, find_anchors, split_index
from agent.archive.recall import recall_tool
from agent.compaction.markers import is_marker, parse_summary_marker
from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.micro_compaction import MicroCompaction
from agent.providers.base import ProviderRequest, ToolSpec
from agent.tools.registry import Tool, ToolContext, ToolRegistry
from tests.agent.scripted import agent_on_store, tool_call
from tests.fakes.provider import FakeProvider

SUMMARIZERS = {
    "drops every anchor": lambda n: f"## Goal\nwork goes on (pass {n})",
    "invents and mangles anchors": lambda n: (
        f"## Goal\nsee [#{900_000 + n}] and [#12O{n}] and [#{n + 1}–#{n + 3}]\n"
        "Archived rows (recall an anchor to read them verbatim): [#1–#999999]"
    ),
}


def _probe_tool() -> Tool:
    async def probe(args: dict, ctx: ToolContext) -> str:  # type: ignore[type-arg]
        return f"probe output {args.get('n')}\n" + "result line\n" * 300

    spec = ToolSpec(name="probe", description="d", parameters={"type": "object"})
    return Tool(spec=spec, handler=probe)


@pytest.mark.parametrize("behaviour", sorted(SUMMARIZERS))
async def test_archived_rows_stay_cited_and_recallable(tmp_path: Path, behaviour: str) -> None:
    """After batch compactions and micro folds, each archived row is inside an active summary's
    anchor, no invented anchor survives, and recall of those anchors returns every such row."""
    passes: list[int] = []

    def summarize(request: ProviderRequest) -> str:
        passes.append(1)
        return SUMMARIZERS[behaviour](len(passes))

    compression = CompressionConfig(micro_compact_when="always", protect_last_n=4)
    summarizer = FakeProvider(responder=summarize)
    micro = MicroCompaction(compression, summarizer=summarizer, summary_model="aux")

    def engine() -> ContextCompressor:
        return ContextCompressor(compression, summarizer=summarizer, summary_model="aux")

    provider = FakeProvider()
    agent, store = await agent_on_store(
        tmp_path,
        provider,
        engine,
        tools=ToolRegistry([_probe_tool(), recall_tool()]),
        end_of_turn=(micro,),
        context_length=24_000,
    )
    try:
        for n in range(50):
            provider.script(tool_call("probe", f"c{n}", n=n), f"done {n} " + "y" * 2_000)
            await agent.run_turn(f"turn {n}: please probe " + "z" * 3_000)
            await agent.finalize_turn()
            await agent.wait_background()
        info = await store.sessions.get_session(agent.session_id)
        assert info is not None and info.compactions >= 3 and info.micro_compactions >= 10

        active = await store.transcript.load_active(agent.session_id)
        cited: list[Anchor] = []
        for marker in (m for m in active if is_marker(m)):
            text = parse_summary_marker(marker) or ""
            assert "900" not in " ".join(str(a) for a in find_anchors(text))
            assert "[#12O" not in text and "#999999" not in text
            cited += split_index(text)[1]
        carried = {m["_id"] for m in active}
        rows = await store.transcript.show(agent.session_id, include_archived=True)
        archived = [
            r["_id"]
            for r in rows
            if r.get("_active") is False
            and r["role"] != "system"
            and r.get("_kind") != "summary"
            and r["_id"] not in carried
        ]
        assert len(archived) > 50
        uncited = [i for i in archived if not any(a.first <= i <= a.last for a in cited)]
        assert uncited == []

        seen: set[int] = set()
        ctx = ToolContext(session_id=agent.session_id, services={"store": store})
        for anchor in cited:
            for page in range(1, 100):
                args = json.dumps({"anchor": str(anchor), "page": page})
                call = {
                    "id": "r",
                    "type": "function",
                    "function": {"name": "recall", "arguments": args},
                }
                text = await agent.tools.run(call, ctx)  # type: ignore[arg-type]
                seen.update(int(i) for i in re.findall(r"^#(\d+) ", text, re.M))
                if "More: recall" not in text:
                    break
        assert set(archived) <= seen
    finally:
        await store.aclose()
