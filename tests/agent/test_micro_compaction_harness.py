"""Shared harness for the micro-compaction tests: a real AIAgent on a SQLite store, fake models.

Not a test module (it holds no tests); the micro-compaction test files import from it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.agent import AgentDeps, AIAgent
from agent.compaction.markers import is_marker, is_micro_marker
from agent.config import CompressionConfig, HermesConfig
from agent.context_compressor import ContextCompressor
from agent.messages import ChatMessage, assistant_message, is_real_user_message
from agent.micro_compaction import MicroCompaction
from agent.prepared_compaction import SpeculativeCompaction
from agent.providers.base import ProviderReply, ProviderRequest, ToolSpec, Usage
from agent.tokens import estimate_messages_tokens_rough
from agent.tools.registry import Tool, ToolContext, ToolRegistry
from state import SqlSessionStore
from tests.fakes.provider import FakeProvider

ANSWER_CHARS = 600
TOOL_OUTPUT_CHARS = 1_200


def read_tool() -> Tool:
    """A `read_log` tool whose output is long and names the turn it ran in."""

    async def handler(args: dict[str, Any], _ctx: ToolContext) -> str:
        tag = str(args.get("tag", "?"))
        return f"log for {tag}: " + ("x" * TOOL_OUTPUT_CHARS)

    spec = ToolSpec(name="read_log", description="read a log", parameters={"type": "object"})
    return Tool(spec=spec, handler=handler)


@dataclass(slots=True)
class MainModel:
    """The main model: `tool_rounds` tool calls per turn, then an answer naming the user text."""

    tool_rounds: int = 0
    calls: int = 0

    def __call__(self, request: ProviderRequest) -> ProviderReply:
        self.calls += 1
        msgs = request.messages
        last_user = max(i for i, m in enumerate(msgs) if is_real_user_message(m))
        text = str(msgs[last_user]["content"])
        done = sum(1 for m in msgs[last_user:] if m.get("role") == "assistant")
        usage = Usage(input_tokens=estimate_messages_tokens_rough(msgs), output_tokens=50)
        if done < self.tool_rounds:
            call = {
                "id": f"call_{self.calls}",
                "type": "function",
                "function": {"name": "read_log", "arguments": json.dumps({"tag": text})},
            }
            message = assistant_message(None, [call])  # type: ignore[list-item]
            return ProviderReply(message=message, usage=usage, stop_reason="tool_use", model="m")
        answer = f"answer to {text}: " + ("y" * ANSWER_CHARS)
        return ProviderReply(
            message=assistant_message(answer), usage=usage, stop_reason="end", model="m"
        )


@dataclass(slots=True)
class Summarizer:
    """The auxiliary model: short rolling summaries, with hooks to fail or reshape replies."""

    folds: list[ProviderRequest] = field(default_factory=list)
    defrags: list[ProviderRequest] = field(default_factory=list)
    fail_when: Callable[[str], bool] | None = None
    text_for: Callable[[str, int], str] | None = None

    def __call__(self, request: ProviderRequest) -> str:
        prompt = str(request.messages[-1]["content"])
        is_defrag = "grown baggy" in prompt
        (self.defrags if is_defrag else self.folds).append(request)
        if self.fail_when is not None and self.fail_when(prompt):
            raise RuntimeError("summarizer failed")
        n = len(self.folds) + len(self.defrags)
        if self.text_for is not None:
            return self.text_for(prompt, n)
        return f"## Goal\nrolling summary number {n}"


def exchange_of(request: ProviderRequest) -> str:
    """The serialized exchange inside a fold request."""
    found = re.search(r"<exchange>\n(.*)\n</exchange>", str(request.messages[-1]["content"]), re.S)
    assert found is not None
    return found.group(1)


@dataclass(slots=True)
class Rig:
    store: SqlSessionStore
    deps: AgentDeps
    micro: MicroCompaction
    summarizer: Summarizer
    main: MainModel
    context_length: int

    async def open(self, session_id: str, *, micro: MicroCompaction | None = None) -> AIAgent:
        """The session's agent, as a fresh process would open it (optionally a fresh micro)."""
        deps = self.deps if micro is None else dataclasses.replace(self.deps, end_of_turn=(micro,))
        return await AIAgent.open(
            deps, session_id=session_id, model="main-model", context_length=self.context_length
        )

    async def new_session(self) -> AIAgent:
        info = await self.store.sessions.create_session(platform="cli")
        return await self.open(info.id)


async def build_rig(
    tmp_path: Path,
    *,
    tool_rounds: int = 0,
    context_length: int = 16_000,
    cache_ttl: str | None = None,
    summarizer: Summarizer | None = None,
    **compression: Any,
) -> Rig:
    """A store on a SQLite file, fake main and auxiliary models, and the micro work wired in."""
    settings = {
        "protect_first_n": 3,
        "protect_last_n": 4,
        "target_ratio": 0.05,
        "micro_compact_when": "always",
        "speculative": False,  # micro-compaction alone; the speculation tests switch it on
    }
    config = HermesConfig(compression=CompressionConfig(**{**settings, **compression}))
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    main = MainModel(tool_rounds=tool_rounds)
    aux = summarizer or Summarizer()
    aux_provider = FakeProvider(responder=aux)
    micro = MicroCompaction(
        config.compression, summarizer=aux_provider, summary_model="aux-model", summary_timeout_s=5
    )
    deps = AgentDeps(
        config=config,
        provider=FakeProvider(responder=main),
        store=store,
        engine_factory=lambda: ContextCompressor(
            config.compression, summarizer=aux_provider, summary_model="aux-model"
        ),
        tools=ToolRegistry([read_tool()]),
        tool_context=ToolContext(session_id=""),
        cache_ttl=cache_ttl,
        end_of_turn=(SpeculativeCompaction(config.compression), micro)
        if config.compression.speculative
        else (micro,),
    )
    return Rig(
        store=store,
        deps=deps,
        micro=micro,
        summarizer=aux,
        main=main,
        context_length=context_length,
    )


async def turn(agent: AIAgent, text: str) -> None:
    """One finished turn and its end-of-turn work, as the CLI runs them: the pass runs after
    the reply, and what it proposed is adopted before the next message."""
    await agent.run_turn(text)
    await agent.finalize_turn()
    await agent.wait_background()
    await agent.proposals.adopt_ready()


def markers(messages: list[ChatMessage]) -> tuple[int, int]:
    """(micro markers, batch markers) in a transcript."""
    micro = sum(1 for m in messages if is_micro_marker(m))
    return micro, sum(1 for m in messages if is_marker(m)) - micro


def user_texts(messages: list[ChatMessage]) -> list[str]:
    return [str(m["content"]) for m in messages if is_real_user_message(m)]
