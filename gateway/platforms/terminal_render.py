"""What the terminal chat shows: the reply sink, the status line, compaction lines, recaps.

The text is decided by pure functions (`status_line`, `compaction_line`, `recap_lines`,
`chat_markdown`); `TerminalSink` only puts a reply on the screen: a spinner with the seconds
elapsed until the first words, then live markdown, and a note when the turn was stopped.

What the model writes (and the tool output it echoes) is inert on the terminal: `inert_text`
shows control characters as visible symbols. It and the other plain-text lines (`compaction_line`,
`resume_hint`) live in `terminal_text`, which `hermes chat -q` uses without this module.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.spinner import Spinner

from agent.messages import ChatMessage, content_text
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
RECAP_EXCHANGES = 3
"""A resumed chat shows this many of its last exchanges."""
RECAP_CHARS = 300
"""Each message of the recap is cut to about this many characters."""


def status_line(
    status: EngineStatus, *, model: str, prompt_tokens: int, hit_ratio: float | None
) -> str:
    """`model · 12% of threshold · cache 87%`: pure, for the bottom toolbar."""
    threshold = status.threshold_tokens
    occupancy = f"{100 * prompt_tokens / threshold:.0f}% of threshold" if threshold else "window ?"
    cache = f"cache {100 * hit_ratio:.0f}%" if hit_ratio is not None else "cache –"
    return f"{model} · {prompt_tokens:,} tokens · {occupancy} · {cache}"


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


class TerminalSink:
    """Renders one reply: a spinner until the first words, then live markdown."""

    streams = True

    def __init__(self, console: Console, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._console = console
        self._clock = clock
        self._buffer = ""
        self._live: Live | None = None
        self._waiting = _Waiting("thinking…", clock(), clock)
        self.compaction_shown = False
        """The chat printed its own compaction line during this reply (so the runner's
        generic notice is not repeated)."""

    async def start(self, session_id: str) -> None:
        self._live = Live(
            self._waiting, console=self._console, refresh_per_second=10, transient=False
        )
        self._live.start()

    def pause(self) -> None:
        """Stop the live area so a question can be asked below it."""
        if self._live is not None:
            self._live.stop()

    def resume(self) -> None:
        if self._live is not None:
            self._live.start()

    def compacting(self) -> None:
        self._waiting.label = "compacting older context…"

    def print_above(self, line: str) -> None:
        """A dim line printed above the reply being rendered."""
        self._console.print(f"[dim]{escape(line)}[/dim]", highlight=False)

    async def on_text(self, delta: str) -> None:
        self._buffer += inert_text(delta)
        if self._live is not None:
            self._live.update(Markdown(chat_markdown(self._buffer)))

    async def notice(self, text: str) -> None:
        from gateway.run import COMPACTED_NOTICE

        if text == COMPACTED_NOTICE and self.compaction_shown:
            return
        self._console.print(f"[dim]{escape(inert_text(text))}[/dim]", highlight=False)

    async def finish(self, text: str) -> None:
        final = Markdown(chat_markdown(inert_text(text) or self._buffer or "(no reply)"))
        self._end(final)

    def interrupted(self) -> None:
        """The turn was stopped: keep what arrived on screen and say so."""
        kept = Markdown(chat_markdown(self._buffer)) if self._buffer else ""
        self._end(kept)
        self._console.print(f"[yellow]{INTERRUPTED_NOTE}[/yellow]", highlight=False)

    def _end(self, final: Markdown | str) -> None:
        if self._live is not None:
            self._live.update(final)
            self._live.stop()
            self._live = None
        elif final:
            self._console.print(final)
