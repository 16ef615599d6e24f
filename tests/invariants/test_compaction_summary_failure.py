"""Lesson: a network error during the summary call silently dropped 110 of 124 messages."""

from __future__ import annotations

import copy

import pytest

from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.errors import CompactionRefused, ProviderUnavailable
from agent.messages import ChatMessage, assistant_message, system_message, user_message
from tests.agent.compaction.transcripts import exchange, persisted
from tests.fakes.provider import FakeProvider


def _session() -> list[ChatMessage]:
    msgs: list[ChatMessage] = [
        system_message("sys"),
        user_message("start"),
        assistant_message("ok"),
    ]
    while len(msgs) < 121:
        msgs += [user_message("more"), *exchange("terminal", "x" * 2_000, command="make")]
    msgs.append(user_message("latest"))
    return persisted(msgs[:124])


async def test_network_error_keeps_all_124_messages() -> None:
    """The summary call fails with a network error: all 124 messages stay, nothing is replaced."""
    msgs = _session()
    assert len(msgs) == 124
    before = copy.deepcopy(msgs)
    provider = FakeProvider().script(ProviderUnavailable("fake", "aux", "connection reset"))
    engine = ContextCompressor(CompressionConfig(), summarizer=provider, summary_model="aux")
    engine.update_model("m", 40_000)
    with pytest.raises(CompactionRefused, match="ProviderUnavailable"):
        await engine.compress(msgs)
    assert msgs == before and all(m.get("_persisted") for m in msgs)
    assert engine.status().consecutive_failures == 1
