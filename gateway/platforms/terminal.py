"""The terminal chat: one more platform feeding the runner, with prompt_toolkit and rich.

Input has history (kept in HERMES_HOME); replies stream as markdown; a status line shows the
model, how full the window is and the cache hit ratio; a spinner shows while context compacts.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.tools.approval import render_request
from gateway.platforms.base import ChatRef, InboundMessage

if TYPE_CHECKING:
    from agent.context_engine import EngineStatus
    from gateway.run import GatewayRunner

__all__ = [
    "TerminalChat",
    "TerminalSink",
    "chat_markdown",
    "parse_terminal_answer",
    "status_line",
]

EXIT_WORDS = frozenset({"/exit", "/quit", "exit", "quit"})
APPROVAL_PROMPT = "Allow? [o]nce / [a]lways for this session / [N]o: "


def parse_terminal_answer(text: str) -> ApprovalAnswer:
    """`o`/`y`/`once` allow once, `a`/`always` for the session; anything else denies."""
    word = text.strip().lower()
    if word in ("o", "once", "y", "yes"):
        return "once"
    if word in ("a", "always"):
        return "session"
    return "deny"


def status_line(
    status: EngineStatus, *, model: str, prompt_tokens: int, hit_ratio: float | None
) -> str:
    """`model · 12% of threshold · cache 87%`: pure, for the bottom toolbar."""
    threshold = status.threshold_tokens
    occupancy = f"{100 * prompt_tokens / threshold:.0f}% of threshold" if threshold else "window ?"
    cache = f"cache {100 * hit_ratio:.0f}%" if hit_ratio is not None else "cache –"
    return f"{model} · {prompt_tokens:,} tokens · {occupancy} · {cache}"


def chat_markdown(text: str) -> str:
    """Markdown where a single newline is a line break, as in chat apps (not inside code)."""
    lines, in_code = [], False
    for line in text.split("\n"):
        fence = line.lstrip().startswith("```")
        in_code ^= fence
        lines.append(line if in_code or fence or not line.strip() else line + "  ")
    return "\n".join(lines)


class TerminalSink:
    """Renders one reply: a spinner until the first words, then live markdown."""

    streams = True

    def __init__(self, console: Console) -> None:
        self._console = console
        self._buffer = ""
        self._live: Live | None = None

    async def start(self, session_id: str) -> None:
        self._live = Live(
            Spinner("dots", text="thinking…"),
            console=self._console,
            refresh_per_second=10,
            transient=False,
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
        if self._live is not None and not self._buffer:
            self._live.update(Spinner("dots", text="compacting older context…"))

    async def on_text(self, delta: str) -> None:
        self._buffer += delta
        if self._live is not None:
            self._live.update(Markdown(chat_markdown(self._buffer)))

    async def notice(self, text: str) -> None:
        self._console.print(f"[dim]{text}[/dim]")

    async def finish(self, text: str) -> None:
        final = Markdown(chat_markdown(text or self._buffer or "(no reply)"))
        if self._live is not None:
            self._live.update(final)
            self._live.stop()
            self._live = None
        else:
            self._console.print(final)


class TerminalChat:
    """The interactive loop: read a line, hand it to the runner, render the reply."""

    def __init__(
        self,
        runner: GatewayRunner,
        *,
        console: Console | None = None,
        history_file: Path | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        can_prompt: bool = False,
    ) -> None:
        """`can_prompt`: a person is at a TTY to answer approvals (else risky actions are
        refused, as everywhere nobody can approve)."""
        self._runner = runner
        self._can_prompt = can_prompt
        self._console = console or Console()
        self._history_file = history_file
        self._user_id = user_id or getpass.getuser()
        self._session_id = session_id
        self._sink: TerminalSink | None = None
        self._status = ""

    @property
    def status(self) -> str:
        """The bottom toolbar's text: model, occupancy, cache hit ratio."""
        return self._status

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask the person at the terminal: allow once, always for this session, or deny."""
        from prompt_toolkit import PromptSession

        if self._sink is not None:
            self._sink.pause()
        try:
            self._console.print(render_request(request), markup=False, highlight=False)
            answer = await PromptSession[str]().prompt_async(APPROVAL_PROMPT)
        except (EOFError, KeyboardInterrupt):
            answer = ""
        finally:
            if self._sink is not None:
                self._sink.resume()
        return parse_terminal_answer(answer)

    def on_event(self, name: str, payload: dict[str, Any]) -> None:
        """Runtime events: show the compaction spinner while one runs."""
        if name == "compaction:start" and self._sink is not None:
            self._sink.compacting()

    async def run(self, *, banner: str | None = None) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        history = FileHistory(str(self._history_file)) if self._history_file else InMemoryHistory()
        prompt: PromptSession[str] = PromptSession(history=history)
        if banner:
            self._console.print(banner)
        self._console.print("[dim]Type /help for commands, /exit to leave.[/dim]")
        while True:
            try:
                text = await prompt.prompt_async("you › ", bottom_toolbar=lambda: self._status)
            except (EOFError, KeyboardInterrupt):
                break
            text = text.strip()
            if not text:
                continue
            if text.lower() in EXIT_WORDS:
                break
            await self.send(text)

    async def send(self, text: str) -> str:
        """One message through the runner, rendered; returns the reply text."""
        message = InboundMessage(
            chat=ChatRef(platform="terminal", chat_id="local"),
            user_id=self._user_id,
            text=text,
            is_direct=True,
        )
        self._sink = TerminalSink(self._console)
        approver = self.approve if self._can_prompt else None
        try:
            outcome = await self._runner.submit(
                message, self._sink, session_id=self._session_id, approver=approver
            )
        finally:
            self._sink = None
        self._session_id = outcome.session_id
        await self._refresh_status()
        return outcome.reply

    async def _refresh_status(self) -> None:
        from agent.pricing import cache_hit_ratio

        if self._session_id is None:
            return
        agent = await self._runner.agent_for(self._session_id)
        usage = agent.last_usage
        self._status = status_line(
            agent.engine.status(),
            model=agent.model,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            hit_ratio=cache_hit_ratio(usage) if usage else None,
        )
