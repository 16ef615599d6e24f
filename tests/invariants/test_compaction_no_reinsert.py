"""Lesson: a compaction re-inserted the transcript it replaced (the live set regrew 58K -> 512K)."""

from __future__ import annotations

from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.messages import ChatMessage, assistant_message, user_message
from tests.agent.compaction.transcripts import exchange, persisted, worked_example
from tests.fakes.provider import FakeProvider


def _grow(msgs: list[ChatMessage], n: int) -> list[ChatMessage]:
    out = list(msgs)
    for i in range(n):
        out += [user_message(f"u{i}"), *exchange("read_file", "c" * 8_000, path="f.py")]
        out.append(assistant_message("ok"))
    return out


async def test_repeated_compactions_never_bring_back_replaced_messages() -> None:
    """Across five passes, no replaced message returns and the live set stays bounded."""
    engine = ContextCompressor(
        CompressionConfig(),
        summarizer=FakeProvider(responder=lambda _: "## Goal\ng"),
        summary_model="a",
    )
    engine.update_model("m", 200_000)
    msgs = persisted(worked_example())
    replaced: list[ChatMessage] = []  # holding them keeps their ids unique
    for _ in range(5):
        result = await engine.compress(msgs)
        kept = {id(m) for m in result.messages}
        replaced += [m for m in msgs if id(m) not in kept]
        assert not {id(m) for m in replaced} & kept
        assert sum(m.get("_kind") == "summary" for m in result.messages) == 1
        assert result.tokens_after < 60_000
        msgs = _grow(result.messages, 12)
