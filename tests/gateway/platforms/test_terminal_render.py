"""What the terminal chat shows, decided purely: compaction lines, recaps, the elapsed spinner."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from agent.messages import assistant_message, tool_message, user_message
from gateway.platforms.terminal_render import (
    TerminalSink,
    compaction_line,
    format_tokens,
    recap_lines,
)


@pytest.mark.parametrize(
    ("tokens", "shown"),
    [(0, "0"), (950, "950"), (9_400, "9K"), (38_400, "38K"), (1_250_000, "1.2M")],
)
def test_format_tokens(tokens: int, shown: str) -> None:
    """Token counts read at a glance: plain under a thousand, then K, then M."""
    assert format_tokens(tokens) == shown


def test_compaction_line_is_one_line_with_counts_and_time() -> None:
    """The line after a compaction: messages, tokens and seconds, before and after."""
    line = compaction_line(
        messages_before=41,
        messages_after=12,
        tokens_before=38_200,
        tokens_after=9_100,
        seconds=3.14,
    )
    assert line == "compacted 41 → 12 messages, 38K → 9K tokens, 3.1 s"


def test_recap_shows_the_last_exchanges_without_tool_traffic() -> None:
    """A resumed chat shows its last three exchanges, one line each, long text cut, tool
    calls and results and summary markers left out."""
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    transcript = [
        {"role": "system", "content": "sys"},
        user_message("one"),
        assistant_message("answer one"),
        {"role": "user", "content": "summary of old things", "_kind": "summary"},
        user_message("two\nlines"),
        assistant_message(None, [call]),
        tool_message("c1", "ls", "files"),
        assistant_message("answer two"),
        user_message("three " + "x" * 400),
        assistant_message("answer three"),
        user_message("four"),
    ]
    lines = recap_lines(transcript)
    assert lines[0] == "you › two lines"
    assert lines[1] == "hermes › answer two"
    assert lines[2].startswith("you › three xxx") and lines[2].endswith("…")
    assert len(lines[2]) < 320
    assert lines[3:] == ["hermes › answer three", "you › four"]


async def test_spinner_counts_the_seconds_until_the_first_words() -> None:
    """Before the reply starts, the spinner says how long the turn has been running."""
    now = [100.0]
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False, color_system=None)
    sink = TerminalSink(console, clock=lambda: now[0])
    await sink.start("s")
    now[0] = 107.4
    console.print(sink._waiting)
    await sink.finish("done")
    assert "thinking… 7s" in out.getvalue() and "Esc or Ctrl-C stops" in out.getvalue()
