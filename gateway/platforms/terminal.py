"""The terminal chat: one more platform feeding the runner, with prompt_toolkit and rich.

Input has history (kept in HERMES_HOME) and multi-line editing (`terminal_keys`); replies stream
as markdown with a spinner counting seconds (`terminal_render`); Esc or Ctrl-C stops a reply and
keeps what arrived; a status line shows the model, how full the window is and the cache hit
ratio; each compaction prints one line. The chat names its session itself (a new one on first
use, or the one it was resumed on) and follows `/new` and `/resume`; chat commands run in the
runner, as on every platform.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, assert_never

from rich.console import Console
from rich.markup import escape

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.events import (
    AgentEvent,
    CompactionBegan,
    CompactionCommitted,
    EngineSwitched,
    ModelSwitched,
    NativeCompaction,
    SessionReloaded,
    ToolFinished,
    ToolStarted,
)
from agent.tools.approval import render_request
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.platforms.terminal_keys import prompt_key_bindings, watch_turn_keys
from gateway.platforms.terminal_render import (
    TerminalSink,
    chat_markdown,
    compaction_line_of,
    inert_text,
    new_chat_status,
    recap_lines,
    resume_hint,
    status_line,
    tool_result_lines,
    tool_start_line,
)

if TYPE_CHECKING:
    from prompt_toolkit.input import Input

    from gateway.run import GatewayRunner, TurnOutcome

__all__ = [
    "APPROVAL_PROMPT",
    "EXIT_HINT",
    "TerminalChat",
    "TerminalSink",
    "chat_markdown",
    "parse_terminal_answer",
    "status_line",
]

EXIT_WORDS = frozenset({"/exit", "/quit", "exit", "quit"})
APPROVAL_PROMPT = "Allow? [o]nce / [a]lways for this session / [N]o: "
EXIT_HINT = "press Ctrl-C again or Ctrl-D to exit"
PROMPT = "you › "


def parse_terminal_answer(text: str) -> ApprovalAnswer:
    """`o`/`y`/`once` allow once, `a`/`always` for the session; anything else denies."""
    word = text.strip().lower()
    if word in ("o", "once", "y", "yes"):
        return "once"
    if word in ("a", "always"):
        return "session"
    return "deny"


class TerminalChat:
    """The interactive loop: read a message, hand it to the runner, render the reply."""

    def __init__(
        self,
        runner: GatewayRunner,
        *,
        console: Console | None = None,
        history_file: Path | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        can_prompt: bool = False,
        watch_keys: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        model: str | None = None,
    ) -> None:
        """`can_prompt`: a person is at a TTY to answer approvals (else risky actions are
        refused, as everywhere nobody can approve). `watch_keys`: read Esc and Ctrl-C during
        a reply (default: `can_prompt`; piped input keeps its lines for the prompt instead).
        `session_id`: the session to resume; None starts a new one on first use. `model`: the
        model named before there is a session (default: the configured one)."""
        self._runner = runner
        self._can_prompt = can_prompt
        self._watch_keys = can_prompt if watch_keys is None else watch_keys
        self._console = console or Console()
        self._history_file = history_file
        self._user_id = user_id or getpass.getuser()
        self._session_id = session_id
        self._clock = clock
        self._sink: TerminalSink | None = None
        self._model = model or runner.config.model.default
        self._status = new_chat_status(self._model, runner.default_context_length)

    @property
    def status(self) -> str:
        """The bottom toolbar's text: model, occupancy, cache hit ratio."""
        return self._status

    @property
    def session_id(self) -> str | None:
        """The session this chat is on (None until the first message)."""
        return self._session_id

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask the person at the terminal: allow once, always for this session, or deny."""
        from prompt_toolkit import PromptSession

        if self._sink is not None:
            self._sink.pause()
        try:
            shown = inert_text(render_request(request))  # the command as text, never as escapes
            self._console.print(shown, markup=False, highlight=False)
            answer = await PromptSession[str]().prompt_async(APPROVAL_PROMPT)
        except (EOFError, KeyboardInterrupt):
            answer = ""
        finally:
            if self._sink is not None:
                self._sink.resume()
        return parse_terminal_answer(answer)

    def on_event(self, event: AgentEvent) -> None:
        """Runtime events: each tool call as it runs (its command, then its folded output),
        the compaction spinner while one runs, one line when it is done."""
        match event:
            case ToolStarted(tool=tool, arguments=arguments):
                self._above(tool_start_line(tool, arguments))
            case ToolFinished(result=result):
                for line in tool_result_lines(result):
                    self._above(line)
            case CompactionBegan():
                if self._sink is not None:
                    self._sink.compacting()
            case CompactionCommitted():
                if event.kind == "batch":  # a micro pass is adopted quietly
                    self._show_compaction(compaction_line_of(event))
            case NativeCompaction():
                return  # compacted elsewhere: nothing to count here
            case SessionReloaded() | ModelSwitched() | EngineSwitched():
                return
            case unreachable:
                assert_never(unreachable)

    def _show_compaction(self, line: str) -> None:
        if self._sink is not None:
            self._sink.print_above(line)
            self._sink.compaction_shown = True
        else:
            self._console.print(f"[dim]{line}[/dim]", highlight=False)

    def _above(self, line: str) -> None:
        if self._sink is not None:
            self._sink.print_above(line)
        else:
            self._console.print(f"[dim]{escape(line)}[/dim]", highlight=False)

    async def run(self, *, banner: str | None = None) -> None:
        """Read and send messages until /exit, Ctrl-D or a second Ctrl-C on an empty prompt."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        history = FileHistory(str(self._history_file)) if self._history_file else InMemoryHistory()
        prompt: PromptSession[str] = PromptSession(
            history=history, key_bindings=prompt_key_bindings(), prompt_continuation="   … "
        )
        if banner:
            self._console.print(banner, markup=False, highlight=False)
        if self._session_id is not None:
            await self.show_session(resumed=True)
        await self._refresh_status()  # filled before the first reply
        self._console.print(
            "[dim]Type /help for commands and keys, /exit to leave; Alt-Enter for a new line.[/dim]"
        )
        armed = False
        while True:
            try:
                text = await prompt.prompt_async(PROMPT, bottom_toolbar=lambda: self._status)
            except KeyboardInterrupt:
                if armed:
                    break
                armed = True
                self._console.print(f"[dim]{EXIT_HINT}[/dim]")
                continue
            except EOFError:
                break
            armed = False
            text = text.strip()
            if not text:
                continue
            if text.lower() in EXIT_WORDS:
                break
            await self.send(text)
        await self._say_goodbye()

    async def send(self, text: str) -> str:
        """One message through the runner, rendered; returns the reply text."""
        message = InboundMessage(
            chat=ChatRef(platform="terminal", chat_id="local"),
            user_id=self._user_id,
            text=text,
            is_direct=True,
        )
        if self._session_id is None:
            self._session_id = await self._runner.new_session(message)
        sink = self._sink = TerminalSink(self._console, clock=self._clock)
        approver = self.approve if self._can_prompt else None
        done = self._runner.submit(message, sink, session_id=self._session_id, approver=approver)
        try:
            with watch_turn_keys(self._key_source(), lambda: self._stop(done)):
                outcome = await done
        finally:
            self._sink = None
            sink.close()  # a turn that ended without an answer stops drawing too
        if outcome.interrupted:
            sink.interrupted()
        await self._follow(outcome)
        await self._refresh_status()  # after every command too: /new, /resume, /compress, /undo
        return outcome.reply

    async def show_session(self, *, resumed: bool) -> None:
        """A banner for the session the chat is on, and its last few exchanges."""
        from gateway.command_actions import format_age

        if self._session_id is None:
            return
        info = await self._runner.store.sessions.get_session(self._session_id)
        if info is None:
            return
        title = f" “{escape(inert_text(info.title))}”" if info.title else ""
        age = format_age(time.time() - info.updated_at)
        verb = "Resumed" if resumed else "On"
        self._console.print(
            f"[bold]{verb} session {info.id}[/bold]{title} · {info.total_messages} messages · "
            f"last used {age}",
            highlight=False,
        )
        for line in recap_lines(await self._runner.store.transcript.load_active(info.id)):
            self._console.print(f"[dim]{escape(inert_text(line))}[/dim]", highlight=False)

    def _stop(self, done: Any) -> None:
        self._runner.interrupt(done)

    def _key_source(self) -> Input | None:
        if not self._watch_keys:
            return None
        from prompt_toolkit.application.current import get_app_session

        return get_app_session().input

    async def _follow(self, outcome: TurnOutcome) -> None:
        """Stay on the session the runner says the chat is on now (`/new`, `/resume`)."""
        if not outcome.session_id or outcome.session_id == self._session_id:
            return
        self._session_id = outcome.session_id
        if outcome.command == "resume":
            await self.show_session(resumed=True)

    async def _say_goodbye(self) -> None:
        if self._session_id is None:
            return
        from gateway.command_actions import has_conversation

        info = await self._runner.store.sessions.get_session(self._session_id)
        if info is not None and has_conversation(info):
            self._console.print(resume_hint(self._session_id), highlight=False)

    async def _refresh_status(self) -> None:
        from agent.pricing import cache_hit_ratio

        if self._session_id is None:
            self._status = new_chat_status(self._model, self._runner.default_context_length)
            return
        agent = await self._runner.agent_for(self._session_id)
        usage = agent.last_usage
        self._status = status_line(
            agent.engine.status(),
            model=agent.model,
            prompt_tokens=usage.prompt_tokens
            if usage
            else agent.engine.current_tokens(agent.transcript),
            hit_ratio=cache_hit_ratio(usage) if usage else None,
            session_id=agent.session_id,
        )
