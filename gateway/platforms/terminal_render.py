"""What the terminal chat shows: the reply sink, the status line, compaction lines, recaps.

The text is decided by pure functions (`status_line`, `compaction_line`, `recap_lines`,
`chat_markdown`); `TerminalSink` only puts a reply on the screen: a spinner with the seconds
elapsed until the first words, then the reply scrolling as it streams (`terminal_stream`), and a
note when the turn was stopped.

What the model writes (and the tool output it echoes) is inert on the terminal: `inert_text`
shows control characters as visible symbols. It and the other plain-text lines (`compaction_line`,
`resume_hint`) live in `terminal_text`, which `hermes chat -q` uses without this module.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.segment import Segment
from rich.spinner import Spinner

from agent.messages import ChatMessage, content_text
from gateway.platforms.terminal_stream import Row, ScrollingReply
from gateway.platforms.terminal_text import (
    compaction_line,
    compaction_line_of,
    format_tokens,
    inert_text,
    resume_hint,
)

if TYPE_CHECKING:
    from agent.context_engine import EngineStatus

__all__ = [
    "INTERRUPTED_NOTE",
    "inert_text",
    "new_chat_status",
    "TerminalSink",
    "chat_markdown",
    "compaction_line",
    "compaction_line_of",
    "format_tokens",
    "recap_lines",
    "resume_hint",
    "status_line",
]

INTERRUPTED_NOTE = "⏹ interrupted: what arrived is kept; say what to do next."
TICK_S = 0.08
"""The streamed reply is redrawn this often at most (slower when a long reply takes longer)."""
LIVE_MARGIN_ROWS = 2
"""The live region is at most the screen's height less these rows."""
RECAP_EXCHANGES = 3
"""A resumed chat shows this many of its last exchanges."""
RECAP_CHARS = 300
"""Each message of the recap is cut to about this many characters."""


def status_line(
    status: EngineStatus,
    *,
    model: str,
    prompt_tokens: int,
    hit_ratio: float | None,
    session_id: str = "",
) -> str:
    """`model · 1,234 tokens · 12% of threshold · cache 87% · <session id>`: pure, for the
    bottom toolbar."""
    threshold = status.threshold_tokens
    occupancy = f"{100 * prompt_tokens / threshold:.0f}% of threshold" if threshold else "window ?"
    cache = f"cache {100 * hit_ratio:.0f}%" if hit_ratio is not None else "cache –"
    session = f" · {session_id}" if session_id else ""
    return f"{model} · {prompt_tokens:,} tokens · {occupancy} · {cache}{session}"


def new_chat_status(model: str, context_length: int) -> str:
    """The bottom toolbar of a chat with no session yet (one starts with the first message)."""
    return f"{model} · new session · window {format_tokens(context_length)}"


TOOL_PREVIEW_LINES = 3
_EXIT = re.compile(r"\n?\[exit code (-?\d+)\]\s*$")


def tool_start_line(name: str, arguments: str, *, width: int = 160) -> str:
    """`⏺ terminal  ls -la`: a tool call as it starts, on one line."""
    line = inert_text(f"⏺ {name}  {arguments}").rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


def tool_result_lines(result: str, *, width: int = 160) -> list[str]:
    """A tool's result folded: `  ⎿ exit 0 · 12 lines`, the first lines, `  … 9 more lines`."""
    match = _EXIT.search(result)
    body = result[: match.start()] if match else result
    lines = [line for line in body.rstrip().splitlines() if line.strip()]
    head = f"exit {match.group(1)} · " if match else ""
    shown = [f"  ⎿ {head}{len(lines)} line{'s' if len(lines) != 1 else ''}"]
    for line in lines[:TOOL_PREVIEW_LINES]:
        text = f"    {inert_text(line)}"  # tool output is shown, never obeyed
        shown.append(text if len(text) <= width else text[: width - 1] + "…")
    if len(lines) > TOOL_PREVIEW_LINES:
        shown.append(f"    … {len(lines) - TOOL_PREVIEW_LINES} more lines")
    return shown


def chat_markdown(text: str) -> str:
    """Markdown where a single newline is a line break, as in chat apps (not inside code)."""
    lines, in_code = [], False
    for line in text.split("\n"):
        fence = line.lstrip().startswith("```")
        in_code ^= fence
        lines.append(line if in_code or fence or not line.strip() else line + "  ")
    return "\n".join(lines)


def recap_lines(
    transcript: Sequence[ChatMessage], *, exchanges: int = RECAP_EXCHANGES
) -> list[str]:
    """The last few things the user said and the answers, one line each (`you ›`, `hermes ›`),
    for a resumed chat; tool traffic and summaries are left out."""
    said = [
        (m["role"], " ".join(content_text(m).split()))
        for m in transcript
        if m.get("role") in ("user", "assistant")
        and m.get("_kind") != "summary"
        and content_text(m).strip()
    ]
    starts = [i for i, (role, _) in enumerate(said) if role == "user"]
    first = starts[-exchanges] if len(starts) >= exchanges else 0
    lines = []
    for role, text in said[first:]:
        cut = text if len(text) <= RECAP_CHARS else text[: RECAP_CHARS - 1].rstrip() + "…"
        lines.append(f"{'you' if role == 'user' else 'hermes'} › {cut}")
    return lines


class _Waiting:
    """A spinner whose text counts the seconds since the turn started (`thinking… 3s`)."""

    def __init__(self, label: str, started: float, clock: Callable[[], float]) -> None:
        self.label, self._started, self._clock = label, started, clock
        self._spinner = Spinner("dots")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        elapsed = self._clock() - self._started
        self._spinner.update(text=f"{self.label} {elapsed:.0f}s · Esc or Ctrl-C stops")
        yield self._spinner


class _Rows:
    """Rendered rows as a renderable (printed as they are: already laid out at a width)."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for row in self.rows:
            yield from row
            yield Segment.line()


class TerminalSink:
    """Renders one reply: a spinner until the first words, then the reply as it streams:
    settled rows printed once into the scrollback, the newest ones in a live region
    (`terminal_stream.ScrollingReply`), redrawn every `TICK_S` by one task on the loop."""

    streams = True

    def __init__(self, console: Console, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._console = console
        self._clock = clock
        self._reply = ScrollingReply(self._render)
        self._live: Live | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._paused = False
        self._drawn = (-1, -1)
        self._waiting = _Waiting("thinking…", clock(), clock)
        self.compaction_shown = False
        """The chat printed its own compaction line during this reply (so the runner's
        generic notice is not repeated)."""

    async def start(self, session_id: str) -> None:
        self._live = Live(
            self._waiting,
            console=self._console,
            auto_refresh=False,  # redrawn by `_tick`, on the loop: no thread reads the reply
            transient=False,
            vertical_overflow="visible",  # the tail is cut to the screen by `ScrollingReply`
        )
        self._live.start(refresh=True)
        self._ticker = asyncio.create_task(self._run_ticker(), name="terminal-reply")

    def pause(self) -> None:
        """Stop the live area so a question can be asked below it."""
        if self._live is not None and not self._paused:
            self._print(self._reply.close())
            self._live.update(_Rows([]))
            self._live.stop()
            self._paused = True

    def resume(self) -> None:
        if self._live is not None and self._paused:
            self._paused = False
            self._live.update(self._waiting)
            self._live.start(refresh=True)

    def compacting(self) -> None:
        self._waiting.label = "compacting older context…"

    def print_above(self, line: str) -> None:
        """A dim line printed above the reply being rendered (what streamed before it first)."""
        self._print(self._reply.close())
        self._console.print(f"[dim]{escape(line)}[/dim]", highlight=False)
        self._redraw()

    async def on_text(self, delta: str) -> None:
        self._reply.add(inert_text(delta))  # drawn by the next tick

    async def notice(self, text: str) -> None:
        from gateway.run import COMPACTED_NOTICE

        if text == COMPACTED_NOTICE and self.compaction_shown:
            return
        self.print_above(inert_text(text))

    async def finish(self, text: str) -> None:
        final = inert_text(text) or ("" if self._reply.text.strip() else "(no reply)")
        self._end(self._reply.finish(final, self._console.width))

    def interrupted(self) -> None:
        """The turn was stopped: keep what arrived on screen and say so."""
        self._end(self._reply.close())
        self._console.print(f"[yellow]{INTERRUPTED_NOTE}[/yellow]", highlight=False)

    def close(self) -> None:
        """Stop drawing (a turn that ended without `finish`, e.g. a failure in the chat)."""
        self._end([])

    def _end(self, rows: Sequence[Row]) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._live is not None:
            self._live.update(_Rows([]))
            if not self._paused:
                self._live.stop()  # an empty live region: nothing is left drawn twice
            self._live = None
        self._print(rows)

    async def _run_ticker(self) -> None:
        while True:
            started = self._clock()
            self._tick()
            spent = self._clock() - started  # a long reply renders slower: draw less often
            await asyncio.sleep(max(TICK_S, 3 * spent))

    def _tick(self) -> None:
        if self._live is None or self._paused:
            return
        width = self._console.width
        if not self._reply.pending.strip():
            self._live.update(self._waiting, refresh=True)  # the spinner counts on
            return
        if self._drawn == (len(self._reply.text), width):
            return
        self._drawn = (len(self._reply.text), width)
        rows = self._reply.settle(width)
        tail = self._reply.tail(width, max(1, self._console.height - LIVE_MARGIN_ROWS))
        self._print(rows)  # above the live region
        self._live.update(_Rows(tail), refresh=True)

    def _redraw(self) -> None:
        self._drawn = (-1, -1)
        self._tick()

    def _print(self, rows: Sequence[Row]) -> None:
        if rows:
            self._console.print(_Rows(rows), highlight=False, crop=False, soft_wrap=True)

    def _render(self, markdown: str, width: int) -> list[Row]:
        options = self._console.options.update_width(width)
        rows = self._console.render_lines(Markdown(chat_markdown(markdown)), options, pad=False)
        return [_trimmed(row) for row in rows]


def _trimmed(row: list[Segment]) -> list[Segment]:
    """`row` without the blank padding rich puts after the text (a code block's background
    stays): a row as wide as the window would take two rows once the window narrows."""
    row = list(row)
    while row and not (row[-1].style and row[-1].style.bgcolor) and not row[-1].control:
        text = row[-1].text.rstrip(" ")
        if text:
            row[-1] = Segment(text, row[-1].style)
            break
        row.pop()
    return row
