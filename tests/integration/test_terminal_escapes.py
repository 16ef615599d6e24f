"""Terminal output is inert (issue 32): a reply cannot drive the terminal it is shown on.

A model that echoes tool output can put `ESC]52;c;…` (OSC 52: write the clipboard), `ESC]0;…`
(OSC 0: the window title) or CSI sequences (move the cursor, erase the screen) into its reply.
ECMA-48 and xterm's ctlseqs define them as ESC-led byte strings; `inert_text` shows every
control character as a visible symbol (ESC as U+241B ␛), so none of them reaches a terminal as a
control sequence. `hermes chat -q` does this when stdout is a terminal (a real pty here); the
terminal chat always does; `--json` escapes them by JSON's own rules.
"""

from __future__ import annotations

import io
import json
import os
import pty
import select
import sys
from pathlib import Path

import pytest
from rich.console import Console

import run_agent
from gateway.platforms.terminal_render import TerminalSink, inert_text
from sim.llm_server import FakeLLM, Turn
from tests.integration.test_chat_cli import write_config

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaAo=\x07"
TITLE = "\x1b]0;pwned\x1b\\"
CSI = "\x1b[2J\x1b[H"
REPLY = f"Here you go: {CLIPBOARD}{TITLE}{CSI}done\r\nbye"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b]52;c;QQ==\x07", "␛]52;c;QQ==␇"),
        ("a\x1b[31mred", "a␛[31mred"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("crlf\r\nline", "crlf\nline"),
        ("over\rwrite", "over␍write"),
        ("c1 \x9b31m csi", "c1 <U+009B>31m csi"),
        ("del\x7f", "del\u2421"),
        ("bidi \u202egnp.exe", "bidi <U+202E>gnp.exe"),
        ("plain words, émoji 🙂", "plain words, émoji 🙂"),
    ],
)
def test_inert_text(text: str, shown: str) -> None:
    """Control characters become visible symbols; text, newlines and tabs stay as they are."""
    assert inert_text(text) == shown


def _read_all(fd: int) -> bytes:
    out = b""
    while select.select([fd], [], [], 0.2)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out


def test_chat_q_on_a_terminal_shows_escapes_instead_of_obeying_them(
    threaded_llm: FakeLLM, hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hermes chat -q` with stdout on a pty: the reply's OSC 52, OSC 0 and CSI arrive as
    visible text, and no ESC byte of the reply reaches the terminal."""
    write_config(hermes_home, threaded_llm, "anthropic")
    threaded_llm.script(Turn(text=REPLY))
    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", encoding="utf-8", buffering=1)
    try:
        monkeypatch.setattr(sys, "stdout", terminal)
        code = run_agent.main(["chat", "-q", "show me the file"])
        terminal.flush()
        shown = _read_all(master).decode("utf-8")
    finally:
        terminal.close()
        os.close(master)
    assert code == 0
    assert "\x1b" not in shown and "\x07" not in shown
    assert "␛]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaAo=␇" in shown and "␛]0;pwned" in shown
    assert "done" in shown and "bye" in shown


def test_chat_q_into_a_pipe_and_json_keep_the_bytes_faithfully(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a terminal: the reply is passed on as it is (a script asked for it); `--json`
    carries ESC escaped as \\u001b by JSON's rules."""
    write_config(hermes_home, threaded_llm, "anthropic")
    threaded_llm.script(Turn(text=REPLY), Turn(text=REPLY))
    assert run_agent.main(["chat", "-q", "raw please"]) == 0
    assert CLIPBOARD in capsys.readouterr().out
    assert run_agent.main(["chat", "-q", "json please", "--json"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and json.loads(out)["reply"] == REPLY


async def test_the_terminal_chat_renders_replies_inert() -> None:
    """The chat's live markdown: streamed deltas and the final text show ␛, never ESC ] 52."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120, color_system="truecolor")
    sink = TerminalSink(console)
    await sink.start("s")
    for piece in (REPLY[:20], REPLY[20:45], REPLY[45:]):
        await sink.on_text(piece)
    await sink.notice(f"note {TITLE}")
    await sink.finish(REPLY)
    shown = buffer.getvalue()
    assert "\x1b]52" not in shown and "\x1b]0;" not in shown and "\x1b[2J" not in shown
    assert "␛]52;c;" in shown


def test_tool_lines_in_the_chat_are_inert() -> None:
    """The chat shows each tool call and the first lines of its output: escapes in a command or
    in what it printed are shown, not obeyed."""
    from gateway.platforms.terminal_render import tool_result_lines, tool_start_line

    start = tool_start_line("terminal", f"printf '{CLIPBOARD}'")
    lines = tool_result_lines(f"{CLIPBOARD}\n{TITLE}\nplain\n[exit code 0]")
    shown = "\n".join([start, *lines])
    assert "\x1b" not in shown and "\x07" not in shown
    assert "␛]52;c;" in shown and lines[0] == "  ⎿ exit 0 · 3 lines"
