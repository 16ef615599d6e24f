"""Batch compaction end to end: the real runtime, the real Anthropic SDK, the real store."""

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

SUMMARY = (
    "## Goal\nSet up a FastAPI project with tests and error handling\n"
    "## Progress\n### Done\n- Created main.py with 5 endpoints\n### In Progress\n"
    "- Fixing 2 failing tests\n## Relevant Files\n- main.py\n- tests/test_api.py\n"
    "## Next Steps\n- Fix failing test fixtures\n- Add error handling"
)


def _is_summary_request(body: dict[str, Any]) -> bool:
    text = str(body.get("system", "")) + str(body.get("messages", ""))
    return "## Goal" in text and "## Critical Context" in text


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    def responder(body: dict[str, Any], api: str) -> Turn | None:
        return Turn(text=SUMMARY) if _is_summary_request(body) else None

    async with FakeLLM(expected_key="test-key", responder=responder) as llm:
        yield llm


def _config(fake: FakeLLM, **compression: Any) -> HermesConfig:
    return parse_config(
        {
            "model": {
                "provider": "anthropic",
                "default": "claude-sonnet-4-6",
                "base_url": fake.url,
                "api_key": "test-key",
                "context_length": 200_000,
            },
            "auxiliary": {"compression": {"model": "claude-haiku-4-5"}},
            "compression": {"micro_compact": False, **compression},
        }
    )


async def _runtime_with_worked_example(fake: FakeLLM, home: Path, **compression: Any):  # type: ignore[no-untyped-def]
    runtime = await Runtime.start(_config(fake, **compression), home, {})
    info = await runtime.store.sessions.create_session(platform="cli", model="claude-sonnet-4-6")
    await runtime.store.transcript.append(info.id, worked_example())
    return runtime, info.id


async def test_seed_worked_example_through_the_sdk(fake: FakeLLM, tmp_path: Path) -> None:
    """45 messages / ~95K tokens compact to ~25 messages / ~45K; the store matches memory."""
    runtime, session_id = await _runtime_with_worked_example(fake, tmp_path)
    async with runtime:
        agent = await runtime.open_agent(session_id)
        assert len(agent.transcript) == 45
        result = await agent.compress(reason="manual")

        assert 85_000 <= result.tokens_before <= 100_000
        assert 22 <= result.messages_after <= 28
        assert 35_000 <= result.tokens_after <= 50_000
        summary_calls = [r for r in fake.requests if _is_summary_request(r.json or {})]
        assert len(summary_calls) == 1 and summary_calls[0].json["model"] == "claude-haiku-4-5"

        markers = [m for m in agent.transcript if is_summary_marker(m)]
        assert len(markers) == 1 and "FastAPI" in content_text(markers[0])
        assert agent.transcript[1]["content"] == "Help me set up a FastAPI project"
        assert agent.transcript[-1]["content"] == "Great, also add error handling"

        reloaded = await runtime.store.transcript.load_active(session_id)
        assert [(m["role"], content_text(m)) for m in reloaded] == [
            (m["role"], content_text(m)) for m in agent.transcript
        ]
        everything = await runtime.store.transcript.show(session_id, include_archived=True)
        assert len([m for m in everything if not m.get("_active", True)]) >= 45 - 28
        # nothing lost: every original message is still searchable
        assert await runtime.store.search.search("Fix the failing tests", session_id=session_id)


async def test_next_turn_sends_the_compacted_transcript(fake: FakeLLM, tmp_path: Path) -> None:
    """After compaction the model sees system, head, summary, tail and the new message."""
    runtime, session_id = await _runtime_with_worked_example(fake, tmp_path)
    async with runtime:
        agent = await runtime.open_agent(session_id)
        await agent.compress(reason="manual")
        result = await agent.run_turn("and add logging too")
        assert result.reply.endswith("and add logging too")  # the unanswered user turn merges in
        sent = fake.requests[-1].json
        assert sent is not None
        assert "Earlier conversation" in str(sent["messages"]) or "compact" in str(sent).lower()
        assert len(sent["messages"]) <= 30


async def test_a_session_over_the_threshold_is_compacted_without_making_the_user_wait(
    fake: FakeLLM, tmp_path: Path
) -> None:
    """A session over the threshold (but within the window) is answered first: the compaction
    is prepared after the reply, from a snapshot, and swapped in when the next turn starts;
    no summary call ever runs inside a turn, and it is counted once."""
    runtime, session_id = await _runtime_with_worked_example(
        fake, tmp_path, threshold=0.8, model_thresholds={"claude-sonnet": 0.3}
    )
    async with runtime:
        agent = await runtime.open_agent(session_id)
        # 0.3 is floored to 0.75 on a 200K window: 150K; shrink the window instead.
        agent.switch_model("claude-sonnet-4-6", 120_000)
        result = await agent.run_turn("what next?")
        assert not result.compacted and not _summary_calls(fake)  # the user did not wait
        await agent.finalize_turn()
        await agent.wait_background()  # the idle gap: the compaction is prepared
        assert len(_summary_calls(fake)) == 1
        second = await agent.run_turn("and then?")
        assert len(_summary_calls(fake)) == 1  # swapped in, not summarized again
        info = await runtime.store.sessions.get_session(session_id)
        assert info is not None and info.compactions == 1
        sent = fake.requests[-1].json or {}
        assert second.reply and len(sent["messages"]) < 30


def _summary_calls(fake: FakeLLM) -> list[object]:
    return [r for r in fake.requests if _is_summary_request(r.json or {})]


def test_sessions_compress_from_the_shell(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hermes sessions compress ID --focus ...` compacts a stored session from the shell."""
    import asyncio

    import run_agent

    threaded_llm.responder = lambda body, api: (
        Turn(text=SUMMARY) if _is_summary_request(body) else None
    )
    (hermes_home / "config.yaml").write_text(
        f"model:\n  provider: anthropic\n  default: claude-sonnet-4-6\n  base_url: {threaded_llm.url}\n"
        "  api_key: test-key\n  context_length: 200000\ncompression:\n  micro_compact: false\n"
    )

    async def seed() -> str:
        async with await Runtime.start(run_agent._load(hermes_home), hermes_home, {}) as runtime:
            info = await runtime.store.sessions.create_session(platform="cli")
            await runtime.store.transcript.append(info.id, worked_example())
            return str(info.id)

    session_id = asyncio.run(seed())
    code = run_agent.main(["sessions", "compress", session_id, "--focus", "the test fixtures"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"Compacted {session_id}: 45 →" in out
    summary_calls = [r for r in threaded_llm.requests if _is_summary_request(r.json or {})]
    assert len(summary_calls) == 1 and "the test fixtures" in str(summary_calls[0].json)
    assert run_agent.main(["sessions", "compress", "missing-id"]) == 2


TOO_LONG = Turn(error=(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000"))


async def test_context_too_long_compacts_and_retries_once(fake: FakeLLM, tmp_path: Path) -> None:
    """A 400 'prompt is too long' compacts the session and the same turn succeeds on the retry."""
    runtime, session_id = await _runtime_with_worked_example(fake, tmp_path)
    async with runtime:
        agent = await runtime.open_agent(session_id)
        fake.script(TOO_LONG)  # the summary responder answers the compaction in between
        result = await agent.run_turn("keep going")
        assert result.compacted
        assert result.reply.endswith("keep going")
        assert len(fake.requests[-1].json["messages"]) < 30
        info = await runtime.store.sessions.get_session(session_id)
        assert info is not None and info.compactions == 1


async def test_context_too_long_twice_is_a_clear_error(fake: FakeLLM, tmp_path: Path) -> None:
    """When the compacted prompt is still too long, the turn ends with ContextTooLong, once."""
    from agent.errors import ContextTooLong

    runtime, session_id = await _runtime_with_worked_example(fake, tmp_path)
    async with runtime:
        agent = await runtime.open_agent(session_id)
        fake.script(TOO_LONG, TOO_LONG)
        with pytest.raises(ContextTooLong, match="compact"):
            await agent.run_turn("keep going")
        main_calls = [r for r in fake.requests if not _is_summary_request(r.json or {})]
        assert len(main_calls) == 2  # the first try and one retry after compacting
        stored = await runtime.store.search.search("keep going", session_id=session_id)
        assert stored  # the user's message is kept
