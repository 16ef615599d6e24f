"""Invariant (issue 14): after any sequence of turns, the next request fits the window, or the
user gets one sentence that says what is too big (a single message larger than the window).

The model behind the agent is a strict stand-in for an OpenAI-compatible local server: it
counts prompt + max_tokens against its window, as llama-cpp-python and vLLM do, reports the
prompt it counted in its usage, and answers an overflow with their wording ("This model's
maximum context length is W tokens. However, you requested N tokens (P in the messages, M in
the completion)"). Its own count runs `ratio` times our chars/4 estimate (non-Latin text
under-counts by a third or more), and the agent is told a window that may be wrong.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from agent.agent import AgentDeps, AIAgent
from agent.config import CompressionConfig, HermesConfig, ModelConfig
from agent.context_compressor import ContextCompressor
from agent.errors import ContextTooLong
from agent.messages import assistant_message
from agent.providers.base import ProviderReply, ProviderRequest, ToolSpec, Usage
from agent.tokens import estimate_messages_tokens_rough
from agent.tools.registry import Tool, ToolContext, ToolRegistry
from state import SqlSessionStore
from tests.fakes.provider import FakeProvider

turn_st = st.tuples(
    st.integers(min_value=1, max_value=40_000),  # characters the user sends
    st.lists(st.integers(min_value=10, max_value=60_000), max_size=3),  # tool outputs (chars)
)


class StrictServer:
    """The model: `calls` tool calls per turn where asked, else an answer; strict about size."""

    def __init__(self, window: int, ratio: float, plans: list[list[int]]) -> None:
        self.window, self.ratio, self.plans = window, ratio, plans
        self.turn = -1
        self.overflows = 0

    def __call__(self, request: ProviderRequest) -> ProviderReply:
        counted = int(estimate_messages_tokens_rough(request.messages) * self.ratio)
        if counted + request.max_tokens > self.window:
            self.overflows += 1
            requested = counted + request.max_tokens
            raise ContextTooLong(
                "custom",
                request.model,
                f"HTTP 400: This model's maximum context length is {self.window} tokens. However, "
                f"you requested {requested} tokens ({counted} in the messages, "
                f"{request.max_tokens} in the completion).",
                window_tokens=self.window,
                prompt_tokens=counted,
            )
        usage = Usage(input_tokens=counted, output_tokens=20)
        last = request.messages[-1]
        pending = self.plans[self.turn] if last.get("role") == "user" else []
        if pending:
            calls = [
                {
                    "id": f"c{self.turn}_{i}",
                    "type": "function",
                    "function": {"name": "fetch", "arguments": json.dumps({"chars": n})},
                }
                for i, n in enumerate(pending)
            ]
            message = assistant_message(None, calls)  # type: ignore[arg-type]
            return ProviderReply(message=message, usage=usage, stop_reason="tool_use", model="m")
        return ProviderReply(
            message=assistant_message(f"done with turn {self.turn}"),
            usage=usage,
            stop_reason="end",
            model="m",
        )


def _ticks() -> Callable[[], float]:
    """A clock that moves ten seconds each time it is read: deterministic, and past backoffs."""
    counter = itertools.count()
    return lambda: 10.0 * next(counter)


def _fetch_tool() -> Tool:
    async def handler(args: dict[str, Any], _ctx: ToolContext) -> str:
        return "r" * int(args["chars"])

    spec = ToolSpec(name="fetch", description="fetch", parameters={"type": "object"})
    return Tool(spec=spec, handler=handler)


async def _scenario(
    tmp: Path, turns: list[tuple[int, list[int]]], window: int, told: int, ratio: float
) -> None:
    server = StrictServer(window, ratio, [calls for _, calls in turns])
    config = HermesConfig(
        model=ModelConfig(max_tokens=4096),
        compression=CompressionConfig(micro_compact=False),
    )
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp / 'state.db'}")
    aux = FakeProvider(responder=lambda _r: "## Goal\nkeep going")
    deps = AgentDeps(
        config=config,
        provider=FakeProvider(responder=server),
        store=store,
        engine_factory=lambda: ContextCompressor(
            config.compression,
            summarizer=aux,
            summary_model="aux",
            max_output_tokens=4096,
            clock=_ticks(),  # simulated time: backoffs end by count, never by the wall clock
        ),
        tools=ToolRegistry([_fetch_tool()]),
        tool_context=ToolContext(session_id="", max_output_chars=10**6),
    )
    try:
        session = await store.sessions.create_session()
        agent = await AIAgent.open(deps, session_id=session.id, model="m", context_length=told)
        for index, (chars, _calls) in enumerate(turns):
            server.turn = index
            text = f"turn {index} " + "u" * chars
            try:
                await agent.run_turn(text)
            except ContextTooLong as exc:
                # Only a message larger than the window (as far as the agent was told or
                # learned) may fail, and it says so.
                assert int(len(text) * ratio / 4) > min(window, told) * 0.6, str(exc)
                assert "last message is about" in str(exc) or "must be kept" in str(exc)
                server.plans[index] = []
                server.turn = index
                await agent.run_turn("a short follow-up")  # the session is still usable
    finally:
        await store.aclose()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(turn_st, min_size=1, max_size=8),
    window=st.sampled_from([8_192, 16_384, 32_768]),
    told=st.sampled_from([8_192, 32_768, 128_000]),
    ratio=st.sampled_from([0.8, 1.0, 1.5]),
)
def test_the_next_request_always_fits_or_one_sentence_says_why(
    tmp_path_factory: Any, turns: list[tuple[int, list[int]]], window: int, told: int, ratio: float
) -> None:
    """Random turns of user text and tool output against a strict server never brick a session."""
    tmp = tmp_path_factory.mktemp("s")
    with capture_logs():
        asyncio.run(_scenario(tmp, turns, window, min(told, 10**9), ratio))
