"""At a tight window a compaction frees room for about ten turns: no compaction every few turns.

Issue 31: "no churn at tight windows (a compaction frees enough room for at least ~10 turns of
the session's recent growth, or it degrades as the never-brick rules say; never one every 2
turns)"; at 32K the replay showed one batch compaction every 1.8 turns. Here each turn adds
about 1,200 tokens to a 32K window (threshold 24K): the seed's rule (land under 85% of the
threshold, a tail of 20 messages verbatim) keeps ~16K and compacts again seven turns later.
The real runtime, Anthropic SDK and store against the FakeLLM; compaction prepared ahead, as
by default.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.config import HermesConfig, parse_config
from cli.runtime import Runtime
from sim.llm_server import FakeLLM, Turn

SUMMARY = "## Goal\nKeep the parser fast\n## Progress\n### Done\n- benchmarks written"
TURNS = 60


def _is_summary_request(body: dict[str, Any]) -> bool:
    """The agent always offers its tools; the summarizer never does."""
    return not body.get("tools")


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    def responder(body: dict[str, Any], api: str) -> Turn | None:
        if _is_summary_request(body):
            return Turn(text=SUMMARY)
        return Turn(text="Here is the change, step by step. " + "The parser now " * 300)

    async with FakeLLM(expected_key="test-key", responder=responder) as llm:
        yield llm


def _config(fake: FakeLLM) -> HermesConfig:
    return parse_config(
        {
            "model": {
                "provider": "anthropic",
                "default": "claude-sonnet-4-6",
                "base_url": fake.url,
                "api_key": "test-key",
                "context_length": 32_000,
            },
            "compression": {"micro_compact": False},
            "memory": {"enabled": False},
        }
    )


async def test_a_32k_session_compacts_at_most_once_in_ten_turns(
    fake: FakeLLM, tmp_path: Path
) -> None:
    """Every compaction leaves room for ten turns of this session's growth, so two are never
    fewer than ten turns apart; nothing overflows the window meanwhile."""
    runtime = await Runtime.start(_config(fake), tmp_path, {})
    async with runtime:
        info = await runtime.store.sessions.create_session(
            platform="cli", model="claude-sonnet-4-6"
        )
        agent = await runtime.open_agent(info.id)
        compacted_at: list[int] = []
        counted = 0
        for i in range(TURNS):
            await agent.run_turn(f"Step {i}: make the parser faster on long inputs, please.")
            await agent.finalize_turn()
            await agent.wait_background()
            session = await runtime.store.sessions.get_session(agent.session_id)
            assert session is not None
            if session.compactions > counted:
                compacted_at.append(i)
                counted = session.compactions
            assert agent.engine.current_tokens(agent.transcript) < 32_000
        assert len(compacted_at) >= 2  # the session did cross the threshold, more than once
        gaps = [b - a for a, b in zip(compacted_at, compacted_at[1:], strict=False)]
        assert min(gaps) >= 10, compacted_at
