"""The terminal chat driven through prompt_toolkit's pipe input, rendered by rich into a string."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent.context_engine import EngineStatus
from agent.tools.progress import one_line_arguments
from gateway.platforms.terminal import TerminalChat, status_line
from gateway.platforms.terminal_render import tool_result_lines, tool_start_line
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import make_config, start_runtime
from tests.waits import WAIT_S


@pytest.mark.parametrize(
    ("threshold", "tokens", "ratio", "expected"),
    [
        (1000, 250, 0.5, "m · 250 tokens · 25% of threshold · cache 50%"),
        (0, 0, None, "m · 0 tokens · window ? · cache –"),
    ],
)
def test_status_line(threshold: int, tokens: int, ratio: float | None, expected: str) -> None:
    """The status line shows the model, occupancy of the threshold and the cache hit ratio."""
    status = EngineStatus(engine="e", model="m", context_length=0, threshold_tokens=threshold)
    assert status_line(status, model="m", prompt_tokens=tokens, hit_ratio=ratio) == expected


async def test_terminal_chat_renders_the_reply_and_the_status_line(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typed line goes through the runner; the markdown reply is printed; the status line fills."""
    llm.script(Turn(text="**Hello** from the terminal."))
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False, color_system=None)
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        chat = TerminalChat(runner, console=console, history_file=tmp_path / "history")
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            pipe.send_text("hi there\r")
            pipe.send_text("/exit\r")
            async with asyncio.timeout(WAIT_S):
                await chat.run(banner="Hermes test")
        await runner.stop()
    rendered = out.getvalue()
    assert "Hermes test" in rendered
    assert "Hello from the terminal." in rendered  # markdown rendered, asterisks gone
    assert "**Hello**" not in rendered
    assert chat.status.startswith("test-model · ")
    assert "% of threshold" in chat.status and "cache " in chat.status
    assert (tmp_path / "history").read_text().count("hi there") == 1
    assert [r.api for r in llm.requests] == ["anthropic"]


def test_single_newlines_render_as_line_breaks() -> None:
    """Command output and chat replies keep their lines; code blocks are left alone."""
    from gateway.platforms.terminal import chat_markdown

    assert chat_markdown("a\nb\n\nc") == "a  \nb  \n\nc  "
    assert chat_markdown("```\nx = 1\n```") == "```\nx = 1\n```"


@pytest.mark.parametrize(("answer", "ran"), [("n", False), ("o", True), ("a", True)])
async def test_dangerous_command_is_asked_at_the_terminal(
    answer: str, ran: bool, llm: FakeLLM, db_path: Path, tmp_path: Path
) -> None:
    """The chat pauses its spinner, shows the exact command, and runs it only when allowed."""
    from cli.runtime import Runtime
    from sim.llm_server import ToolCallSpec

    marker = tmp_path / "ran.txt"
    # Classified dangerous (a download piped into a shell) yet harmless: port 9 is closed.
    command = f"touch {marker}; curl -s http://127.0.0.1:9/x | sh"
    llm.script(
        Turn(tool_calls=[ToolCallSpec("terminal", json.dumps({"command": command}))]),
        Turn(text="done"),
    )
    config = make_config(llm, db_path, tools={"enabled": ["terminal"], "approval": "ask"})
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None)
    async with await Runtime.start(
        config, _hermes_home(tmp_path), {}, workspace=tmp_path
    ) as runtime:
        runner = GatewayRunner(runtime)
        chat = TerminalChat(runner, console=console, can_prompt=True)
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            pipe.send_text("clean up\r")
            pipe.send_text(f"{answer}\r")
            pipe.send_text("/exit\r")
            async with asyncio.timeout(WAIT_S):
                await chat.run()
        await runner.stop()
    assert "The agent wants to run" in out.getvalue() and command in out.getvalue()
    tool_result = [m for m in llm.requests[-1].json["messages"] if m["role"] == "user"][-1]
    assert marker.exists() is ran
    assert ("Refused" in json.dumps(tool_result)) is not ran


async def test_compress_prints_one_line_and_a_short_chat_says_nothing_to_compact(
    llm: FakeLLM, db_path: Path, tmp_path: Path
) -> None:
    """`/compress` on a two-message chat says there is nothing to compact yet; after a longer
    chat it compacts, and the chat prints one `compacted A → B messages, …` line."""
    from cli.runtime import Runtime
    from gateway.command_actions import NOTHING_TO_COMPACT
    from tests.gateway.harness import is_summary_request, summary_responder

    llm.responder = summary_responder()
    config = make_config(
        llm,
        db_path,
        model={"context_length": 4000},
        compression={"protect_first_n": 1, "protect_last_n": 2, "micro_compact": False},
    )
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None)
    holder: list[TerminalChat] = []
    runtime = await Runtime.start(
        config, tmp_path, {}, on_event=lambda e: holder[0].on_event(e) if holder else None
    )
    async with runtime:
        runner = GatewayRunner(runtime)
        chat = TerminalChat(runner, console=console)
        holder.append(chat)
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            pipe.send_text("hello\r/compress\r")
            for n in range(4):
                pipe.send_text(f"note {n} " + "words " * 100 + "\r")
            pipe.send_text("/compress\r/exit\r")
            running = asyncio.create_task(chat.run())
            try:
                # Seven steps, each waited for on its own: five replies, then the summary call.
                for n in range(1, 7):
                    await llm.wait_requests(n, timeout=WAIT_S)
                async with asyncio.timeout(WAIT_S):
                    await running  # the last reply, the compaction line, /exit
            finally:
                running.cancel()
                await asyncio.wait([running])
        await runner.stop()
    assert [is_summary_request(r.json or {}) for r in llm.requests] == [False] * 5 + [True]
    rendered = out.getvalue()
    assert NOTHING_TO_COMPACT in rendered
    assert "compacted 11 → " in rendered and " tokens, " in rendered
    assert f"resume with: hermes chat --resume {chat.session_id}" in rendered


async def test_status_line_is_filled_on_resume_and_follows_new_and_undo(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bottom toolbar is filled from the session before the first reply of a resumed chat,
    and refreshed after commands: /new shows the fresh session's size, not the old one's."""
    llm.script(Turn(text="a long answer " * 100))
    console = Console(file=io.StringIO(), width=100, force_terminal=False, color_system=None)
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        chat = TerminalChat(runner, console=console)
        async with asyncio.timeout(WAIT_S):
            await chat.send("tell me a lot about this " * 100)
            talked, first = chat.status, chat.session_id
            await chat.send("/new")
            fresh = chat.status
        resumed = TerminalChat(runner, console=console, session_id=first)
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            pipe.send_text("/exit\r")
            async with asyncio.timeout(WAIT_S):
                await resumed.run()
        await runner.stop()

    def tokens(status: str) -> int:
        return int(status.split(" · ")[1].split()[0].replace(",", ""))

    assert tokens(talked) > 500 and 0 < tokens(fresh) < 200
    assert tokens(resumed.status) > 500  # the resumed session's size, before any reply


def test_tool_lines_fold_the_output_and_show_the_exit_code() -> None:
    assert tool_start_line("terminal", "ls -la") == "⏺ terminal  ls -la"
    assert len(tool_start_line("terminal", "x" * 500)) == 160
    folded = tool_result_lines("a\nb\n\nc\nd\ne\n[exit code 2]")
    assert folded == ["  ⎿ exit 2 · 5 lines", "    a", "    b", "    c", "    … 2 more lines"]
    assert tool_result_lines("found 1 match") == ["  ⎿ 1 line", "    found 1 match"]
    assert tool_result_lines("") == ["  ⎿ 0 lines"]


def test_one_line_arguments() -> None:
    assert one_line_arguments({"command": "cd /tmp &&\n  ls"}) == "cd /tmp && ⏎ ls"
    assert one_line_arguments({"path": "notes.md", "content": "long"}) == "notes.md"
    assert (
        one_line_arguments({"query": "pelican", "limit": 3}) == '{"query": "pelican", "limit": 3}'
    )


def _hermes_home(tmp_path: Path) -> Path:
    """HERMES_HOME beside the workspace (tmp_path): a workspace never holds HERMES_HOME."""
    home = tmp_path.parent / f"{tmp_path.name}-hermes"
    home.mkdir(exist_ok=True)
    return home
