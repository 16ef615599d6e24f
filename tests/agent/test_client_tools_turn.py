"""A turn offering the caller's tools, through the real agent loop on a real store: the calls
end the turn unexecuted, the results continue it, and the session stays well-paired."""

from __future__ import annotations

from pathlib import Path

from agent.compaction.sanitize import find_orphans
from agent.config import parse_config
from agent.context_engine import ContextEngine
from agent.engine_resolution import load_context_engine
from agent.providers.base import ToolSpec
from agent.providers.call_options import CallOptions
from agent.tools.builtin import builtin_tools
from agent.tools.registry import ToolRegistry
from agent.turn_options import TurnOptions
from tests.agent.scripted import agent_on_store, tool_call
from tests.fakes.provider import FakeProvider

CONFIG = parse_config({"model": {"context_length": 100_000}})
LOOKUP = ToolSpec(name="read_file", description="the client's own", parameters={"type": "object"})
"""Named like a Hermes tool on purpose: a client's call must never run Hermes' tool."""


class _Asked:
    """End-of-turn work that only counts how often it was offered a turn."""

    def __init__(self) -> None:
        self.asked = 0

    def delay_s(self, session: object) -> float | None:
        self.asked += 1
        return None

    async def __call__(self, session: object) -> None:
        return None

    def forget_session(self, session_id: str) -> None: ...


def _engine() -> ContextEngine:
    return load_context_engine(CONFIG, summarizer=FakeProvider(), summary_model="aux")


async def test_client_tool_calls_end_the_turn_and_results_continue_it(tmp_path: Path) -> None:
    provider = FakeProvider().script(tool_call("read_file", "c1", path="/etc/passwd"), "done")
    work = _Asked()
    agent, store = await agent_on_store(
        tmp_path, provider, _engine, tools=ToolRegistry(builtin_tools()), end_of_turn=(work,)
    )
    options = TurnOptions(client_tools=(LOOKUP,), call=CallOptions(max_tokens=7, stop=("X",)))
    try:
        first = await agent.run_turn("read it", options=options)
        assert [c["id"] for c in first.tool_calls] == ["c1"] and first.model_calls == 1
        request = provider.requests[0]
        assert request.tools == (LOOKUP,)  # only the client's: Hermes' own are not offered
        assert request.max_tokens == 7 and request.options.stop == ("X",)
        stored = await store.transcript.load_active(agent.session_id)
        assert [m["role"] for m in stored] == ["system", "user", "assistant"]  # nothing ran
        await agent.finalize_turn()
        assert work.asked == 0  # no background compaction may cut between call and result

        result = {"role": "tool", "tool_call_id": "c1", "content": "root:x:0:0"}
        second = await agent.run_turn([result], options=options)  # type: ignore[list-item]
        assert second.reply == "done" and second.tool_calls == ()
        stored = await store.transcript.load_active(agent.session_id)
        assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
        assert stored[3]["name"] == "read_file" and stored[3]["content"] == "root:x:0:0"
        assert find_orphans(stored) == ([], [])
        await agent.finalize_turn()
        assert work.asked == 1  # paired again: end-of-turn work resumes
        provider.assert_complete()
    finally:
        await store.aclose()
