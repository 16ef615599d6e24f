"""Lesson: an agent returned to a finished task after compaction (the tail lost the newest request)."""

from __future__ import annotations

from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.messages import ChatMessage, assistant_message, system_message, user_message
from tests.agent.compaction.transcripts import exchange
from tests.fakes.provider import FakeProvider


async def test_newest_request_survives_a_long_autonomous_run() -> None:
    """The last user message, 40 tool exchanges back, is still verbatim after compaction."""
    msgs: list[ChatMessage] = [
        system_message("sys"),
        user_message("old task"),
        assistant_message("done"),
    ]
    for i in range(20):
        msgs += [user_message(f"old step {i}"), *exchange("terminal", "y" * 3_000, command="old")]
    request = user_message("NEW TASK: migrate the database")
    msgs.append(request)
    for _ in range(40):
        msgs += exchange("terminal", "z" * 3_000, command="migrate")
    engine = ContextCompressor(
        CompressionConfig(tail_mode="lean"),
        summarizer=FakeProvider().script("## Goal\nold task finished"),
        summary_model="aux",
    )
    engine.update_model("m", 64_000)
    result = await engine.compress(msgs)
    assert any(m is request for m in result.messages)
    assert result.messages[-2:] == msgs[-2:]  # and the newest exchange
    assert result.tokens_after < result.tokens_before
