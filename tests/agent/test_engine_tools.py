"""The active context engine's tools reach the model, run with the session's context, and leave
with the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.config import parse_config
from agent.context_compressor import ContextCompressor
from agent.context_engine import ContextEngine
from agent.engine_resolution import load_context_engine
from agent.errors import ConfigError
from agent.providers.base import ToolSpec
from agent.tools.builtin import builtin_tools
from agent.tools.registry import Tool, ToolContext, ToolRegistry
from tests.agent.scripted import agent_on_store, tool_call
from tests.fakes.provider import FakeProvider

CONFIG = parse_config({"context": {"engine": "truncate"}, "model": {"context_length": 100_000}})


def _truncate() -> ContextEngine:
    return load_context_engine(CONFIG, summarizer=FakeProvider(), summary_model="aux")


async def test_truncate_tool_runs_through_the_real_loop(tmp_path: Path) -> None:
    """The model sees context_status, calls it, and gets the engine's JSON back as the result."""
    provider = FakeProvider().script(tool_call("context_status"), "Plenty of room.")
    agent, store = await agent_on_store(tmp_path, provider, _truncate)
    try:
        result = await agent.run_turn("how full is the context?")
        assert result.reply == "Plenty of room." and result.model_calls == 2
        offered = [spec.name for spec in provider.requests[0].tools]
        assert offered == ["context_status"]
        tool_row = next(m for m in provider.requests[1].messages if m["role"] == "tool")
        status = json.loads(str(tool_row["content"]))
        assert status["engine"] == "truncate" and status["threshold_tokens"] == 75_000
        stored = await store.transcript.load_active(agent.session_id)
        assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
        provider.assert_complete()
    finally:
        await store.aclose()


async def test_engine_switch_removes_the_old_engines_tools(tmp_path: Path) -> None:
    """After switching to the built-in engine, context_status is no longer offered or runnable."""
    provider = FakeProvider().script(tool_call("context_status"), "gone")
    shared = ToolRegistry(builtin_tools())
    agent, store = await agent_on_store(tmp_path, provider, _truncate, tools=shared)
    try:
        assert "context_status" in agent.tools.names() and "context_status" not in shared.names()
        agent.use_engine(
            ContextCompressor(CONFIG.compression, summarizer=FakeProvider(), summary_model="a")
        )
        await agent.run_turn("status?")
        assert "context_status" not in [s.name for s in provider.requests[0].tools]
        assert [s.name for s in provider.requests[0].tools] == shared.names()
        tool_row = next(m for m in provider.requests[1].messages if m["role"] == "tool")
        assert "unknown tool 'context_status'" in str(tool_row["content"])
        assert agent.engine.name == "compressor" and agent.engine.context_length == 100_000
    finally:
        await store.aclose()


class _SessionAwareEngine(ContextCompressor):
    """An engine whose tool reports the session it was called for."""

    def tools(self) -> list[Tool]:
        async def whoami(args: dict, ctx: ToolContext) -> str:  # type: ignore[type-arg]
            return f"session={ctx.session_id} store={'store' in ctx.services}"

        return [Tool(spec=ToolSpec(name="whoami", description="d", parameters={}), handler=whoami)]


async def test_engine_tool_gets_the_sessions_context(tmp_path: Path) -> None:
    """The call is dispatched with this session's id and the runtime's services."""
    provider = FakeProvider().script(tool_call("whoami"), "ok")

    def engine() -> ContextEngine:
        return _SessionAwareEngine(CONFIG.compression, summarizer=FakeProvider(), summary_model="a")

    agent, store = await agent_on_store(tmp_path, provider, engine)
    try:
        await agent.run_turn("who?")
        tool_row = next(m for m in provider.requests[1].messages if m["role"] == "tool")
        assert tool_row["content"] == f"session={agent.session_id} store=True"
    finally:
        await store.aclose()


async def test_an_engine_tool_may_not_shadow_a_runtime_tool(tmp_path: Path) -> None:
    """An engine offering a tool name the runtime already has is a ConfigError naming both."""

    class Shadowing(ContextCompressor):
        def tools(self) -> list[Tool]:
            return [builtin_tools()[0]]

    def engine() -> ContextEngine:
        return Shadowing(CONFIG.compression, summarizer=FakeProvider(), summary_model="a")

    with pytest.raises(ConfigError, match="'compressor'.*terminal"):
        await agent_on_store(tmp_path, FakeProvider(), engine, tools=ToolRegistry(builtin_tools()))
