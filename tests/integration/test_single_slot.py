"""On a model server that answers one request at a time, background summaries yield to the user.

Issue 31: "background work on a single-slot server yields to the user (never holds the server
when a turn is pending; prepares in idle gaps; a pending user request cancels or pauses it)".
The real runtime (`provider: custom`, so `model.concurrency` defaults to 1), the real OpenAI SDK
and store, against a FakeLLM with one slot: like llama.cpp with `--parallel 1`, it serves one
request at a time, queues the rest first come first served, and drops a task whose client hung
up (llama.cpp's server cancels a task when its connection closes).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import structlog.testing

from agent.compaction.markers import is_micro_marker
from agent.config import HermesConfig, parse_config
from agent.messages import (
    assistant_message,
    content_text,
    is_real_user_message,
    system_message,
    user_message,
)
from cli.runtime import Runtime
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import RecordingSink, inbound
from tests.waits import WAIT_S

SLOW_S = 20 * WAIT_S
"""A background summary on a local 7B model: far longer than a turn may wait for it."""
ROLLING = "## Goal\nkeep the retries\n## Progress\n- folded"
CHAT_KEY = "terminal:dm:u1"
"""The runner's lane key for `inbound(...)`'s default chat."""


def _is_summary(body: dict[str, Any] | None) -> bool:
    """The agent always offers its tools; a summarizer request never does."""
    return body is not None and not body.get("tools")


class _Server:
    """The fake's answers: long replies (so exchanges leave the tail), summaries slow on demand."""

    def __init__(self) -> None:
        self.slow = False

    def __call__(self, body: dict[str, Any], api: str) -> Turn | None:
        if _is_summary(body):
            return Turn(text=ROLLING, delay_s=SLOW_S if self.slow else 0.0)
        return Turn(text="answer: " + "z" * 3_000)


def _config(fake: FakeLLM, **compression: Any) -> HermesConfig:
    return parse_config(
        {
            "model": {
                "provider": "custom",
                "default": "local-model",
                "base_url": fake.openai_base_url,
                "api_key": "test-key",
                "context_length": 16_000,
                "max_retries": 0,
            },
            "compression": {
                "protect_first_n": 1,
                "protect_last_n": 2,
                "target_ratio": 0.05,
                "micro_compact_when": "always",
                **compression,
            },
            "tools": {"approval": "deny"},
            "memory": {"enabled": False},
        }
    )


async def test_a_user_turn_is_served_before_the_background_summary_holding_the_server(
    tmp_path: Path,
) -> None:
    """A fold holds the only slot when the next message comes: the turn cancels it (the server
    drops it) and is answered at once; the fold starts over after the turn, and what it proposes
    is adopted at the next turn with every message kept."""
    answers = _Server()
    async with FakeLLM(expected_key="test-key", responder=answers, slots=1) as fake:
        runtime = await Runtime.start(_config(fake), tmp_path, {})
        async with runtime:
            slot = runtime.deps.server_slot
            assert slot.yields  # provider: custom -> one request at a time
            info = await runtime.store.sessions.create_session(platform="cli", model="local-model")
            agent = await runtime.open_agent(info.id)
            for i in range(4):
                await agent.run_turn(f"request {i}")
                await agent.finalize_turn()
                await agent.wait_background()
            answers.slow = True
            await agent.run_turn("request 4")
            await agent.finalize_turn()
            seen = len(fake.requests)
            requests = await fake.wait_requests(seen + 1, timeout=WAIT_S)
            assert _is_summary(requests[-1].json)  # the fold is being served, for SLOW_S
            answers.slow = False
            async with asyncio.timeout(WAIT_S):  # not SLOW_S: the turn does not wait for it
                result = await agent.run_turn("request 5")
            assert content_text({"role": "assistant", "content": result.reply}).startswith(
                "answer: "
            )
            assert fake.dropped == 1 and slot.preempted == 1
            served = [("summary" if _is_summary(r.json) else "turn") for r in fake.requests]
            assert served[seen:] == ["summary", "turn"]  # the held fold, then the turn at once
            await agent.finalize_turn()
            await agent.wait_background()  # the fold, started over in the idle gap
            assert [("summary" if _is_summary(r.json) else "turn") for r in fake.requests][
                seen + 2 :
            ] == ["summary"]
            await agent.run_turn("request 6")  # its proposal is adopted as this turn begins
            users = [content_text(m) for m in agent.transcript if is_real_user_message(m)]
            assert users == [f"request {i}" for i in range(7)]
            assert sum(1 for m in agent.transcript if is_micro_marker(m)) == 1
            stored = await runtime.store.transcript.load_active(info.id)
            assert [m["_id"] for m in stored] == [m["_id"] for m in agent.transcript]


async def test_hygiene_before_a_turn_neither_waits_for_background_work_nor_summarizes(
    tmp_path: Path,
) -> None:
    """The gateway's 85% hygiene runs before the user's turn, so it is on the user's path: with
    a background summary holding the only slot, it stops that summary (the server drops it)
    rather than wait for it, and compacts with the stopgap rather than ask the model. Before
    this, a 128K replay turn waited 260 s here: hygiene waited for the running summary, then for
    its own (issue 31: "when a summary is not ready and the next request would not fit, use the
    deterministic local summary as a stopgap ... rather than make the user wait")."""
    answers = _Server()
    async with FakeLLM(expected_key="test-key", responder=answers, slots=1) as fake:
        runtime = await Runtime.start(_config(fake), tmp_path, {})
        async with runtime:
            sessions = runtime.store.sessions
            info = await sessions.get_or_create_for_chat("terminal", CHAT_KEY, user_id="u1")
            rows = [system_message("You are a test assistant.")]
            for n in range(18):  # ~14K of the 16K window: over hygiene's 85%
                text = f"turn {n}: " + "x" * 3_000
                rows.append(user_message(text) if n % 2 == 0 else assistant_message(text))
            await runtime.store.transcript.append(info.id, rows)
            runner = GatewayRunner(runtime)
            agent = await runner.agent_for(info.id)
            answers.slow = True
            await agent.finalize_turn()  # end-of-turn work starts and holds the server
            requests = await fake.wait_requests(1, timeout=WAIT_S)
            assert _is_summary(requests[0].json)
            answers.slow = False
            with structlog.testing.capture_logs() as events:
                async with asyncio.timeout(WAIT_S):  # not SLOW_S: nothing waits for it
                    outcome = await runner.submit(inbound("still there?"), RecordingSink())
            await runner.stop()
    assert outcome.compacted and outcome.reply.startswith("answer: ")
    assert fake.dropped == 1  # the background summary, cancelled: its client hung up
    served = ["summary" if _is_summary(r.json) else "turn" for r in fake.requests]
    assert served[:2] == ["summary", "turn"]  # the held summary, then at once the user's turn
    finished = [(e["reason"], e["outcome"]) for e in events if e["event"] == "compaction_finished"]
    assert finished[0] == ("hygiene", "stopgap")
