"""A batch marker and a newer micro marker in the middle: the next summary builds on both."""

from __future__ import annotations

from agent.compaction.markers import make_micro_marker, make_summary_marker
from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.messages import assistant_message, system_message, user_message
from agent.providers.base import ProviderRequest
from tests.agent.compaction.transcripts import exchange, persisted
from tests.fakes.provider import FakeProvider


async def test_summary_request_carries_every_marker_text() -> None:
    """Neither the batch summary nor the micro summary drops out at the next batch compaction."""
    seen: list[ProviderRequest] = []

    def summarize(request: ProviderRequest) -> str:
        seen.append(request)
        return "## Goal\nmerged summary"

    msgs = [
        system_message("sys"),
        user_message("start the project"),
        assistant_message("ok"),
        make_summary_marker("BATCH-SUMMARY-TEXT about the schema", "user"),
        *exchange("read_file", "x" * 4000, path="a.py"),
        make_micro_marker("MICRO-SUMMARY-TEXT about the tests", "user"),
        *[m for i in range(6) for m in exchange("read_file", "y" * 4000, path=f"b{i}.py")],
        user_message("now fix the bug"),
        *exchange("read_file", "z" * 400, path="c.py"),
        assistant_message("done"),
        user_message("thanks, next?"),
    ]
    engine = ContextCompressor(
        CompressionConfig(protect_last_n=3, target_ratio=0.05),
        summarizer=FakeProvider(responder=summarize),
        summary_model="aux",
    )
    engine.update_model("m", 20_000)
    await engine.compress(persisted(msgs), reason="manual")
    assert len(seen) == 1
    prompt = str([m.get("content") for m in seen[0].messages])
    assert "BATCH-SUMMARY-TEXT" in prompt and "MICRO-SUMMARY-TEXT" in prompt
    assert prompt.index("BATCH-SUMMARY-TEXT") < prompt.index("MICRO-SUMMARY-TEXT")
