"""A session can never be bricked by media: 100 photos in one session through the runner, on a
16K-token model, never send a request over the window (the fake bills images by their pixels
as the real API does); the photos that left the context went to the summary as a line each
with their anchor, never as bytes; the store keeps references only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.platforms.base import InboundFile
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM
from sim.llm_server._anthropic import anthropic_prompt_blocks
from tests.agent.media.images import jpeg
from tests.gateway.harness import (
    RecordingSink,
    inbound,
    is_summary_request,
    make_config,
    start_runtime,
    summary_responder,
)

WINDOW = 16_000
PHOTOS = 100


def _billed(body: dict[str, Any]) -> int:
    return sum(block.tokens for block in anthropic_prompt_blocks(body))


async def test_100_photos_never_exceed_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every model request fits the window; every photo turn is answered; compaction ran and
    its summary request carried the photos as described lines, not image blocks."""
    async with FakeLLM(window_tokens=WINDOW, responder=summary_responder()) as llm:
        model = {"context_length": WINDOW, "vision": True, "max_tokens": 512}
        config = make_config(llm, tmp_path / "state.db", model=model)
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            try:
                for i in range(PHOTOS):
                    photo = InboundFile(origin="photo", data=jpeg(1200, 900, seed=i))
                    message = inbound(f"photo {i}: what colour?")
                    message = type(message)(**{**_fields(message), "files": (photo,)})
                    outcome = await runner.submit(message, RecordingSink())
                    assert outcome.kind == "reply", (i, outcome.reply)
            finally:
                await runner.stop()
            store = runtime.store
            async with store._engine.connect() as conn:
                from sqlalchemy import text

                rows = [
                    str(r[0])
                    for r in await conn.execute(
                        text(
                            "SELECT coalesce(CAST(blocks AS TEXT),'') || coalesce(CAST(extra AS TEXT),'') FROM messages"
                        )
                    )
                ]
        requests = [r.json for r in llm.api_requests("anthropic") if r.json is not None]
    turns = [b for b in requests if not is_summary_request(b)]
    summaries = [b for b in requests if is_summary_request(b)]
    assert len(turns) >= PHOTOS
    assert max(_billed(b) for b in turns) <= WINDOW
    assert summaries, "100 photos on a 16K window must have compacted"
    for body in summaries:
        dumped = json.dumps(body)
        assert '"type": "image"' not in dumped and "base64" not in dumped
    assert any(
        "[attached: photo image/jpeg 1200×900" in json.dumps(b, ensure_ascii=False)
        for b in summaries
    )
    last_images = [
        block
        for m in turns[-1]["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "image"
    ]
    assert 1 <= len(last_images) < PHOTOS
    assert not any(";base64," in r or '"data":' in r for r in rows)


def _fields(message: Any) -> dict[str, Any]:
    return {name: getattr(message, name) for name in message.__slots__}
