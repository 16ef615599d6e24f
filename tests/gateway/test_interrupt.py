"""Stopping a turn (`GatewayRunner.interrupt`): what streamed is kept, marked interrupted; a
running tool's process group dies; the stored transcript stays well-formed for the next turn.

Contract (Anthropic Messages API, docs.anthropic.com/en/api/messages): user and assistant turns
alternate, and every `tool_use` block is answered by a `tool_result` in the next user message.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from agent.messages import assistant_message, tool_message, user_message
from agent.turn import INTERRUPTED_MARK, INTERRUPTED_TOOL_RESULT, close_interrupted
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.gateway.harness import RecordingSink, inbound, make_config, start_runtime
from tests.gateway.platform_drivers import wait_until
from tests.waits import WAIT_S

SLOW = " ".join(f"word{n}" for n in range(40))


def _roles_alternate(messages: list[dict[str, object]]) -> bool:
    roles = [m["role"] for m in messages]
    return all(a != b for a, b in zip(roles, roles[1:], strict=False))


def _processes_running(cmdline: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if raw.replace(b"\0", b" ").strip().decode(errors="replace") == cmdline:
                found.append(int(entry.name))
    return found


async def test_interrupt_mid_stream_keeps_the_partial_reply_and_the_next_turn_works(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after a few words: the outcome says interrupted, the store holds the words
    that arrived marked interrupted, and the next request alternates user and assistant."""
    llm.script(Turn(text=SLOW, event_delay_s=0.05), Turn(text="second answer"))
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        sink = RecordingSink()
        done = runner.submit(inbound("tell me a long story"), sink)
        await wait_until(lambda: len(sink.deltas) >= 3, what="three streamed words")
        assert runner.interrupt(done) is True
        async with asyncio.timeout(WAIT_S):
            outcome = await done
        assert outcome.interrupted and outcome.session_id
        stored = await runtime.store.transcript.load_active(outcome.session_id)
        assert [m["role"] for m in stored] == ["system", "user", "assistant"]
        kept = stored[-1]["content"]
        assert isinstance(kept, str) and kept.endswith(INTERRUPTED_MARK)
        assert kept.startswith("".join(sink.deltas).strip()[:10])
        assert "word39" not in kept  # only what had arrived
        async with asyncio.timeout(WAIT_S):
            second = await runner.submit(inbound("go on"), RecordingSink())
        await runner.stop()
    assert second.reply == "second answer" and not second.interrupted
    sent = llm.requests[-1].json
    assert sent is not None and _roles_alternate(sent["messages"])
    assert INTERRUPTED_MARK in json.dumps(sent["messages"])


async def test_interrupt_before_the_first_word_stores_a_marked_empty_reply(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped while the model had not said anything: the assistant message is only the mark."""
    llm.script(Turn(text="too late", delay_s=5.0))
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        done = runner.submit(inbound("hello?"), RecordingSink())
        await llm.wait_requests(1)
        assert runner.interrupt(done)
        async with asyncio.timeout(WAIT_S):
            outcome = await done
        stored = await runtime.store.transcript.load_active(outcome.session_id)
        await runner.stop()
    assert [(m["role"], m["content"]) for m in stored[1:]] == [
        ("user", "hello?"),
        ("assistant", INTERRUPTED_MARK),
    ]


async def test_interrupt_kills_the_running_tool_and_answers_its_call(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command still running is killed with its process group; its call gets an
    "interrupted" result, so the next request pairs every tool_use with a tool_result."""
    command = "sleep 31.5"
    llm.script(
        Turn(tool_calls=[ToolCallSpec("terminal", json.dumps({"command": command}))]),
        Turn(text="next answer"),
    )
    config = make_config(llm, db_path, tools={"enabled": ["terminal"], "approval": "ask"})
    monkeypatch.chdir(tmp_path)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        done = runner.submit(inbound("wait a while"), RecordingSink())
        await wait_until(lambda: bool(_processes_running(command)), what="the command to start")
        assert runner.interrupt(done)
        async with asyncio.timeout(WAIT_S):
            outcome = await done
        await wait_until(lambda: not _processes_running(command), what="the command to die")
        stored = await runtime.store.transcript.load_active(outcome.session_id)
        async with asyncio.timeout(WAIT_S):
            await runner.submit(inbound("never mind"), RecordingSink())
        await runner.stop()
    assert [m["role"] for m in stored[1:]] == ["user", "assistant", "tool", "assistant"]
    assert stored[3]["content"] == INTERRUPTED_TOOL_RESULT
    assert stored[4]["content"] == INTERRUPTED_MARK
    blocks = [
        b
        for m in llm.requests[-1].json["messages"]  # type: ignore[index]
        for b in (m["content"] if isinstance(m["content"], list) else [])
    ]
    uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
    assert uses and uses == results


def test_close_interrupted_leaves_a_finished_answer_alone() -> None:
    """A turn cut after the model's answer arrived needs nothing more."""
    assert close_interrupted([user_message("q"), assistant_message("a")], "") == []


def test_close_interrupted_answers_only_the_open_calls() -> None:
    """Of two tool calls, the one already answered keeps its result; the other gets one."""
    ask = assistant_message(
        None,
        [
            {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        ],
    )
    closing = close_interrupted([user_message("q"), ask, tool_message("c1", "terminal", "ok")], "")
    assert [(m["role"], m.get("tool_call_id"), m.get("name")) for m in closing] == [
        ("tool", "c2", "read_file"),
        ("assistant", None, None),
    ]


def test_close_interrupted_keeps_what_streamed() -> None:
    """The partial reply is kept, with the mark after it."""
    closing = close_interrupted([user_message("q")], "Once upon a ")
    assert closing[0]["content"] == f"Once upon a\n\n{INTERRUPTED_MARK}"


def test_processes_helper_sees_this_process() -> None:
    """The /proc scan the tool test relies on finds a process by its exact command line."""
    cmdline = (Path(f"/proc/{os.getpid()}/cmdline").read_bytes()).replace(b"\0", b" ")
    assert os.getpid() in _processes_running(cmdline.strip().decode(errors="replace"))
