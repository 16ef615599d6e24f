"""A session can never be bricked by what it must keep (issue 14, defect 1).

Contract of the real service, emulated by the fake: Anthropic answers a prompt larger than the
model's window with HTTP 400 `invalid_request_error`, "prompt is too long: N tokens > M maximum"
(docs.anthropic.com, "Errors"); the SDK raises `BadRequestError`, which the provider maps to
`ContextTooLong`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.gateway.harness import (
    WAIT_S,
    RecordingSink,
    inbound,
    make_config,
    start_runtime,
    summary_responder,
)

WINDOW = 14_000
FILE_CHARS = 20_000
"""About 5,000 tokens each once read: three of them do not fit a 14,000-token window."""


async def _ask(runner: GatewayRunner, text: str) -> str:
    sink = RecordingSink()
    async with asyncio.timeout(WAIT_S * 4):
        outcome = await runner.submit(inbound(text), sink)
    return outcome.reply


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    paths = []
    for name in ("alpha", "beta", "gamma"):
        path = tmp_path / f"{name}.log"
        lines = [f"{name} line {i}: " + "data " * 8 for i in range(FILE_CHARS // 50)]
        path.write_text("\n".join(lines), encoding="utf-8")
        paths.append(path)
    return paths


async def test_three_big_reads_at_once_do_not_brick_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: list[Path]
) -> None:
    """The model reads three ~5,000-token files in parallel into a 14,000-token window: the
    turn still gets its answer (the reads are cut to fit, their rows stay archived and
    searchable), and every later message works."""
    reads = [ToolCallSpec("read_file", f'{{"path": "{p}"}}') for p in files]
    async with FakeLLM(window_tokens=WINDOW, responder=summary_responder()) as llm:
        llm.script(Turn(tool_calls=reads), Turn(text="all three read"))
        config = make_config(
            llm,
            tmp_path / "state.db",
            model={"context_length": WINDOW},
            tools={"enabled": ["read_file"]},
        )
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            first = await _ask(runner, "read the three logs")
            replies = [await _ask(runner, f"and now {i}?") for i in range(3)]
            await runner.stop()
            hits = await runtime.store.search('"gamma line 200"')
            active = await runtime.store.load_active(hits[0].session_id)
        overflowed = [r for r in llm.requests if _too_long(llm, r.json)]
    assert first == "all three read"
    assert replies == [f"echo: and now {i}?" for i in range(3)]
    assert len(overflowed) <= 1  # at most one refusal: the agent makes room before it resends
    assert any(not hit.active for hit in hits)  # the full read is archived, still searchable
    assert sum("were cut to fit" in str(m.get("content")) for m in active) == 3


def _too_long(llm: FakeLLM, body: dict[str, Any] | None) -> bool:
    return body is not None and llm._anthropic.prompt_tokens(body) > WINDOW
