"""A request that would not fit, with no prepared compaction ready: a stopgap, then the model's.

Issue 31: "when a summary is not ready and the next request would not fit, use the
deterministic local summary as a stopgap (swap in the model's summary when it arrives) rather
than make the user wait". The real runtime, Anthropic SDK and store against the FakeLLM.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.config import HermesConfig, parse_config
from agent.messages import content_text, is_summary_marker
from cli.runtime import Runtime
from sim.llm_server import FakeLLM, Turn
from tests.agent.compaction.transcripts import worked_example

SUMMARY = "## Goal\nSet up a FastAPI project\n## Progress\n### Done\n- main.py written by the model"


def _is_summary_request(body: dict[str, Any] | None) -> bool:
    """The agent always offers its tools; the summarizer never does."""
    return body is not None and not body.get("tools")


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    def responder(body: dict[str, Any], api: str) -> Turn | None:
        return Turn(text=SUMMARY) if _is_summary_request(body) else None

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
                # The worked example (~91K tokens) plus a reply's reserve does not fit 96K.
                "context_length": 96_000,
            },
            "auxiliary": {"compression": {"model": "claude-haiku-4-5"}},
            "compression": {"micro_compact": False},
            "memory": {"enabled": False},
        }
    )


def _markers(transcript: list[Any]) -> list[str]:
    return [content_text(m) for m in transcript if is_summary_marker(m)]


async def test_the_turn_compacts_with_a_stopgap_and_the_model_summary_replaces_it(
    fake: FakeLLM, tmp_path: Path
) -> None:
    """No summary call inside the turn; after it, one in the background; at the next turn the
    stopgap's marker is swapped for the model's in one write, its row archived, none lost."""
    runtime = await Runtime.start(_config(fake), tmp_path, {})
    async with runtime:
        info = await runtime.store.sessions.create_session(
            platform="cli", model="claude-sonnet-4-6"
        )
        await runtime.store.transcript.append(info.id, worked_example())
        agent = await runtime.open_agent(info.id)
        result = await agent.run_turn("Next, add logging")
        assert result.compacted and result.reply
        assert not any(_is_summary_request(r.json) for r in fake.requests)  # nobody waited
        (stopgap,) = _markers(agent.transcript)
        assert "stopgap" in stopgap and "app/module_3.py" in stopgap  # the local summary
        rows_before = await runtime.store.transcript.show(info.id, include_archived=True)

        await agent.finalize_turn()
        await agent.wait_background()  # the model's summary, made after the reply
        assert sum(_is_summary_request(r.json) for r in fake.requests) == 1
        assert _markers(agent.transcript) == [stopgap]  # proposed, not yet adopted

        await agent.run_turn("And a health endpoint")  # adopted as this turn begins
        (upgraded,) = _markers(agent.transcript)
        assert "main.py written by the model" in upgraded and "stopgap" not in upgraded
        assert "Archived rows" in upgraded  # cited like any batch summary
        stored = await runtime.store.transcript.load_active(info.id)
        assert [m["_id"] for m in stored] == [m["_id"] for m in agent.transcript]
        everything = await runtime.store.transcript.show(info.id, include_archived=True)
        before_ids = {m["_id"] for m in rows_before}
        assert before_ids <= {m["_id"] for m in everything}  # no row lost
        archived = [m for m in everything if not m.get("_active", True)]
        assert any(content_text(m) == stopgap for m in archived)  # the stopgap, archived
        session = await runtime.store.sessions.get_session(info.id)
        assert session is not None and session.compactions == 1  # the swap is no compaction
