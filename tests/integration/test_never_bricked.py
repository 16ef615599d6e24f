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
    RecordingSink,
    inbound,
    make_config,
    start_runtime,
    summary_responder,
)
from tests.waits import WAIT_S

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
            tools={"enabled": ["read_file"], "workspace": str(tmp_path)},
        )
        async with start_runtime(config, _hermes_home(tmp_path), monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            first = await _ask(runner, "read the three logs")
            replies = [await _ask(runner, f"and now {i}?") for i in range(3)]
            await runner.stop()
            hits = await runtime.store.search.search('"gamma line 200"')
            active = await runtime.store.transcript.load_active(hits[0].session_id)
        overflowed = [r for r in llm.requests if _too_long(llm, r.json)]
    assert first == "all three read"
    assert replies == [f"echo: and now {i}?" for i in range(3)]
    assert len(overflowed) <= 1  # at most one refusal: the agent makes room before it resends
    assert any(not hit.active for hit in hits)  # the full read is archived, still searchable
    assert sum("were cut to fit" in str(m.get("content")) for m in active) == 3


def _too_long(llm: FakeLLM, body: dict[str, Any] | None) -> bool:
    return body is not None and llm._anthropic.prompt_tokens(body) > WINDOW


async def test_a_local_server_that_reports_no_window_runs_with_the_default_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14, defect 3: llama-cpp-python's OpenAI-compatible server with an 8,192-token model
    reports no window (no `/props`, nothing in `/v1/models`) and refuses with "This model's
    maximum context length is 8192 tokens. However, you requested N tokens (P in the messages,
    M in the completion)" (prompt + max_tokens count). With the default config, 20 turns of
    3,000-token messages all get their answer; the window is learned from the first refusal,
    remembered in HERMES_HOME, and the next start begins with it."""
    from agent.config import HermesConfig
    from cli.runtime import Runtime

    async with FakeLLM(window_tokens=8_192, overflow="llama_cpp_python") as llm:
        config = HermesConfig.model_validate(
            {
                "model": {
                    "provider": "custom",
                    "default": "local-model",
                    "base_url": llm.openai_base_url,
                    "api_key": "local",
                    "max_retries": 0,
                },
                "state": {"url": f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"},
                "tools": {"enabled": []},
            }
        )
        async with await Runtime.start(config, tmp_path, {}) as runtime:
            assert runtime.context_length == 128_000 and runtime.notices  # told, on the console
            runner = GatewayRunner(runtime)
            replies = [await _ask(runner, f"message {i}: " + "word " * 2_400) for i in range(20)]
            await runner.stop()
        async with await Runtime.start(config, tmp_path, {}) as restarted:
            window, notices = restarted.context_length, restarted.notices
        chats = [r.json for r in llm.requests if r.api == "openai" and r.json]
        refused = sum(1 for body in chats if _too_big_for_8k(llm, body))
    assert [r.split(":", 1)[0] for r in replies] == ["echo" for _ in range(20)]
    assert all(f"message {i}:" in r for i, r in enumerate(replies))
    assert refused == 1  # the one refusal that taught the window
    assert window == 8_192 and notices == []


def _too_big_for_8k(llm: FakeLLM, body: dict[str, Any]) -> bool:
    wire = llm._wires[1]
    return wire.prompt_tokens(body) + int(body.get("max_tokens") or 0) > 8_192


async def test_compress_always_makes_room_in_a_session_that_no_longer_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored session holding a turn whose three reads overflow the window (as a failed
    turn leaves it): `/compress` makes room instead of answering "nothing to compact", and
    the next message is answered."""
    from agent.messages import assistant_message, tool_message, user_message

    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for i in range(3)
    ]
    async with FakeLLM(window_tokens=WINDOW, responder=summary_responder()) as llm:
        config = make_config(llm, tmp_path / "state.db", model={"context_length": WINDOW})
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            first = await _ask(runner, "hello")  # routes the chat to a session
            session_id = (await runtime.store.sessions.list_sessions())[0].id
            await runtime.store.transcript.append(
                session_id,
                [
                    user_message("read the logs"),
                    assistant_message(None, calls),  # type: ignore[arg-type]
                    *(tool_message(f"c{i}", "read_file", "y" * FILE_CHARS) for i in range(3)),
                ],
            )
            await runner.stop()  # a restart: the next agent loads the stored transcript
            runner = GatewayRunner(runtime)
            compacted = await _ask(runner, "/compress")
            after = await _ask(runner, "what did they say?")
            await runner.stop()
    assert first == "echo: hello"
    assert compacted.startswith("Compacted:"), compacted
    assert after == "echo: what did they say?"


def _hermes_home(tmp_path: Path) -> Path:
    """HERMES_HOME beside the workspace (tmp_path): a workspace never holds HERMES_HOME."""
    home = tmp_path.parent / f"{tmp_path.name}-hermes"
    home.mkdir(exist_ok=True)
    return home
