"""Replies for `FakeProvider` scripts that call tools, and a minimal agent rig on a real store."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.agent import AgentDeps, AIAgent, EndOfTurnWork
from agent.config import HermesConfig
from agent.context_engine import ContextEngine
from agent.messages import assistant_message
from agent.providers.base import ProviderReply, Usage
from agent.tools.registry import ToolContext, ToolRegistry
from state import SqlSessionStore
from tests.fakes.provider import FakeProvider

__all__ = ["agent_on_store", "tool_call"]


def tool_call(name: str, call_id: str = "call_1", **arguments: Any) -> ProviderReply:
    """An assistant reply asking for one tool call (stop reason tool_use)."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return ProviderReply(
        message=assistant_message(None, [call]),  # type: ignore[list-item]
        usage=Usage(input_tokens=10, output_tokens=5),
        stop_reason="tool_use",
        model="fake-model",
    )


async def agent_on_store(
    tmp_path: Path,
    provider: FakeProvider,
    engine_factory: Callable[[], ContextEngine],
    *,
    tools: ToolRegistry | None = None,
    config: HermesConfig | None = None,
    end_of_turn: tuple[EndOfTurnWork, ...] = (),
    context_length: int = 100_000,
) -> tuple[AIAgent, SqlSessionStore]:
    """An agent on a fresh SQLite store, with the store offered to tools (as the runtime does)."""
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    deps = AgentDeps(
        config=config or HermesConfig(),
        provider=provider,
        store=store,
        engine_factory=engine_factory,
        tools=tools or ToolRegistry(),
        tool_context=ToolContext(session_id="", services={"store": store}),
        end_of_turn=end_of_turn,
    )
    try:
        info = await store.sessions.create_session()
        agent = await AIAgent.open(
            deps, session_id=info.id, model="m", context_length=context_length
        )
    except BaseException:
        await store.aclose()
        raise
    return agent, store
