"""Which session `hermes chat` starts on: new, the newest (`-c`), a given id, or one picked.

`--resume` without an id opens a picker (prompt_toolkit) of the recent terminal sessions with
their title, age and size; the choice of what to list is pure (`recent_terminal_sessions`).
Importing this module is cheap (`hermes --help` builds its parser with `PICK`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agent.errors import HermesError
from cli.error_boundary import UsageError

if TYPE_CHECKING:
    from state import SessionInfo, SessionStore

__all__ = [
    "PICK",
    "PICKER_SIZE",
    "TERMINAL_PLATFORMS",
    "pick_session",
    "recent_terminal_sessions",
    "starting_session",
]

PICK = "\0pick"
"""`--resume` given without an id: ask which."""
PICKER_SIZE = 15
TERMINAL_PLATFORMS = ("terminal", "cli")
"""Sessions the terminal started (`cli`: those of `hermes chat -q` before it joined the runner)."""


def recent_terminal_sessions(
    sessions: Sequence[SessionInfo], *, limit: int = PICKER_SIZE
) -> list[SessionInfo]:
    """The terminal's sessions that hold a conversation, newest first."""
    from gateway.command_actions import has_conversation

    mine = [s for s in sessions if s.platform in TERMINAL_PLATFORMS and has_conversation(s)]
    return sorted(mine, key=lambda s: (s.updated_at, s.id), reverse=True)[:limit]


async def starting_session(
    store: SessionStore, *, resume: str | None, newest: bool, interactive: bool
) -> str | None:
    """The session to open, or None for a new one (created on first use).

    Raises UsageError with one sentence when the id is unknown, there is nothing to continue,
    or a picker was asked for without a terminal to show it on."""
    if resume == PICK:
        if not interactive:
            raise UsageError(
                "--resume needs a session id when there is no terminal to pick one on; "
                "`hermes sessions list` shows the ids"
            )
        return await pick_session(store)
    if resume:
        if await store.sessions.get_session(resume) is None:
            raise UsageError(f"no session {resume!r}; `hermes sessions list` shows the ids")
        return resume
    if newest:
        found = recent_terminal_sessions(await store.sessions.list_sessions(limit=200), limit=1)
        if not found:
            raise UsageError("no earlier chat to continue; `hermes chat` starts a new one")
        return found[0].id
    return None


async def pick_session(store: SessionStore) -> str | None:
    """Ask which recent session to resume; None (a new session) when there is none or the
    person picks "new"; Ctrl-C leaves."""
    from prompt_toolkit.shortcuts.choice_input import ChoiceInput

    from gateway.command_actions import session_line

    recent = recent_terminal_sessions(await store.sessions.list_sessions(limit=200))
    if not recent:
        print("No earlier chats yet; starting a new one.")
        return None
    now = time.time()
    options: list[tuple[str | None, str]] = [
        (s.id, session_line(s, now=now).strip()) for s in recent
    ]
    options.append((None, "a new session"))
    try:
        return await ChoiceInput[str | None](
            message="Resume which chat? (↑/↓, Enter; Ctrl-C leaves)", options=options
        ).prompt_async()
    except (KeyboardInterrupt, EOFError):
        raise HermesError("no session picked") from None
