"""Chat commands, the same on every platform: one table, pure parsing; the runner carries them out.

`COMMANDS` is the one place a command is declared. The help text, Telegram's command menu
(`setMyCommands`), Discord's slash commands and the close-match answer to an unknown command
are all built from it, so a command added here appears everywhere.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args

__all__ = [
    "COMMANDS",
    "HELP_TEXT",
    "TERMINAL_KEYS",
    "Command",
    "CommandName",
    "CommandSpec",
    "UnknownCommand",
    "close_matches",
    "help_text",
    "start_text",
    "parse_command",
]

CommandName: TypeAlias = Literal[
    "start",
    "help",
    "new",
    "sessions",
    "resume",
    "title",
    "compress",
    "status",
    "model",
    "pin",
    "pins",
    "unpin",
    "remind",
    "jobs",
    "heartbeat",
    "stop",
    "retry",
    "undo",
    "busy",
    "bringback",
    "uncompact",
    "memory",
    "forget",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """One chat command as people see it in a menu and in /help."""

    name: CommandName
    summary: str
    """One line, under 100 characters (Discord's limit for a slash command description)."""
    argument: str = ""
    """The argument's name as help shows it (`focus`, `name`); empty when the command takes none."""
    argument_help: str = ""
    """What the argument means (a Discord option's description)."""
    argument_required: bool = False


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(name="start", summary="say hello and list the commands"),
    CommandSpec(name="help", summary="list the commands"),
    CommandSpec(
        name="new",
        summary="start a fresh session for this chat (the old one stays searchable)",
    ),
    CommandSpec(name="sessions", summary="recent sessions of this chat"),
    CommandSpec(
        name="resume",
        summary="go back to an earlier session of this chat (see /sessions)",
        argument="id",
        argument_help="the session's id, or its last characters, as /sessions shows it",
        argument_required=True,
    ),
    CommandSpec(
        name="title",
        summary="name this session (shown in /sessions); empty shows the name",
        argument="text",
        argument_help="the session's new name",
    ),
    CommandSpec(
        name="compress",
        summary="compact older context now, optionally focused on a topic",
        argument="focus",
        argument_help="what the summary should keep in most detail",
    ),
    CommandSpec(
        name="status",
        summary="model, tokens, window occupancy, compactions, cache hits, cost",
    ),
    CommandSpec(
        name="model",
        summary="switch model (admins; the prompt cache starts cold)",
        argument="name",
        argument_help="the model to switch to; empty shows the current one",
    ),
    CommandSpec(
        name="pin",
        summary="keep TEXT as a standing instruction, word for word, through every compaction",
        argument="text",
        argument_help="the instruction, exactly as it should be kept",
        argument_required=True,
    ),
    CommandSpec(name="pins", summary="the standing instructions of this session"),
    CommandSpec(
        name="unpin",
        summary="drop standing instruction number N (see /pins)",
        argument="n",
        argument_help="the number /pins shows",
        argument_required=True,
    ),
    CommandSpec(
        name="remind",
        summary="remind you here: /remind in 20m call the bank, /remind tomorrow 9:00 TEXT",
        argument="when_text",
        argument_help="when (in 20m, 9:00, tomorrow 9:00, every 1d) and what to remind you of",
        argument_required=True,
    ),
    CommandSpec(
        name="jobs",
        summary="your reminders and scheduled jobs; /jobs cancel|pause|resume|run N",
        argument="action",
        argument_help="cancel, pause, resume or run, and the job's number",
    ),
    CommandSpec(
        name="heartbeat",
        summary="check in when this chat was idle: /heartbeat every 30m PROMPT, or off",
        argument="spec",
        argument_help="every 30m [quiet 22:00-07:00] PROMPT, or off",
    ),
    CommandSpec(name="stop", summary="stop the reply being written (what arrived is kept)"),
    CommandSpec(
        name="retry",
        summary="answer your last message again (the old answer is set aside, not deleted)",
    ),
    CommandSpec(
        name="undo",
        summary="set aside your last message and its answer (kept in the archive)",
    ),
    CommandSpec(
        name="busy",
        summary="what a message sent mid-reply does: queue, interrupt or steer",
        argument="mode",
        argument_help="queue, interrupt or steer; empty shows the current mode",
    ),
    CommandSpec(
        name="bringback",
        summary="bring messages set aside by compaction back into context",
        argument="range",
        argument_help="an anchor such as #12-#40, as the compaction receipt shows; empty: all",
    ),
    CommandSpec(name="uncompact", summary="undo the last compaction, if it fits the window"),
    CommandSpec(name="memory", summary="what I remember about you across conversations"),
    CommandSpec(
        name="forget",
        summary="erase memory entry N (see /memory): gone from search and new conversations",
        argument="n",
        argument_help="the number /memory shows",
        argument_required=True,
    ),
)

_NAMES: frozenset[str] = frozenset(spec.name for spec in COMMANDS)
assert _NAMES == frozenset(get_args(CommandName)), "COMMANDS and CommandName disagree"
_HEAD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}(?:@\w+)?")
"""What a command word looks like: `/etc/hosts is odd` or `/ 2` stay ordinary messages."""

TERMINAL_KEYS = """Keys:
Enter: send · Alt-Enter (or Shift-Enter where the terminal reports it): new line
Ctrl-C or Esc during a reply: stop it (what arrived is kept)
Ctrl-C on an empty prompt twice, Ctrl-D, or /exit: leave (the resume command is printed)"""


def _help_line(spec: CommandSpec) -> str:
    if not spec.argument:
        return f"/{spec.name}: {spec.summary}"
    shown = spec.argument.upper() if spec.argument_required else f"[{spec.argument}]"
    return f"/{spec.name} {shown}: {spec.summary}"


def help_text(*, terminal: bool = False) -> str:
    """`/help`: every command, and in the terminal `/exit` and the keys too."""
    lines = ["Commands:", *(_help_line(spec) for spec in COMMANDS)]
    if terminal:
        lines += ["/exit: leave the chat", "", TERMINAL_KEYS]
    return "\n".join(lines)


HELP_TEXT = help_text()
GREETING = "Hello! I'm Hermes, your assistant. Write to me as you would to a person."


def start_text(*, terminal: bool = False) -> str:
    """`/start` (the first thing every Telegram user sends): a greeting, then /help's list."""
    return f"{GREETING}\n\n{help_text(terminal=terminal)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    name: CommandName
    argument: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownCommand:
    """`/something` that is no command of ours: answered locally, never sent to the model."""

    name: str


def parse_command(text: str) -> Command | UnknownCommand | None:
    """`/name args` (a `@BotName` suffix is ignored); None for an ordinary message."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, rest = stripped[1:].partition(" ")
    if "\n" in head:
        head, _, more = head.partition("\n")
        rest = f"{more} {rest}".strip()
    if not _HEAD.fullmatch(head):
        return None
    name = head.split("@", 1)[0].lower()
    if name not in _NAMES:
        return UnknownCommand(name=name)
    return Command(name=name, argument=rest.strip())  # type: ignore[arg-type]


def close_matches(name: str, *, extra: tuple[str, ...] = ()) -> list[str]:
    """The commands `name` was probably meant to be, best first (at most three)."""
    candidates = [*sorted(_NAMES), *extra]
    found = difflib.get_close_matches(name.lower(), candidates, n=3, cutoff=0.6)
    prefixed = [c for c in candidates if c.startswith(name.lower()) and c not in found]
    return [*found, *prefixed][:3]
