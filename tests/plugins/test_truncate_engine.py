"""The example plugin engine shipped in plugins/context_engine/truncate/."""

from __future__ import annotations

import json

from agent.compaction.sanitize import find_orphans
from agent.config import parse_config
from agent.engine_resolution import load_context_engine
from agent.tools.registry import ToolContext
from tests.agent.compaction.transcripts import worked_example
from tests.fakes.provider import FakeProvider


def _engine(name: str):  # type: ignore[no-untyped-def]
    config = parse_config({"context": {"engine": name}, "model": {"context_length": 100_000}})
    return load_context_engine(config, summarizer=FakeProvider(), summary_model="aux")


async def test_truncate_loads_only_when_named_and_drops_the_middle() -> None:
    """Named, it loads from the plugins directory and compacts without any model call."""
    assert _engine("compressor").name == "compressor"
    engine = _engine("truncate")
    assert engine.name == "truncate" and engine.threshold_tokens == 75_000
    msgs = worked_example()
    assert engine.should_compress(msgs)
    result = await engine.compress(msgs)
    assert result.messages_after < result.messages_before and result.outcome == "truncated"
    assert result.messages[-1] is msgs[-1] and find_orphans(result.messages) == ([], [])


async def test_truncate_exposes_a_tool() -> None:
    """Engines can offer tools: truncate's context_status reports its state as JSON."""
    engine = _engine("truncate")
    (tool,) = engine.tools()
    text = await tool.handler({}, ToolContext(session_id="s"))
    assert json.loads(text)["engine"] == "truncate"
