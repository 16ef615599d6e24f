"""Chat commands, the same on every platform: one table, pure parsing; the runner carries them out.

`COMMANDS` is the one place a command is declared. The help text, Telegram's command menu
(`setMyCommands`) and Discord's slash commands are all built from it, so a command added here
appears everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args

__all__ = [
    "COMMANDS",
    "HELP_TEXT",
    "Command",
    "CommandName",
    "CommandSpec",
    "parse_command",
]

CommandName: TypeAlias = Literal[
    "help", "new", "compress", "status", "model", "sessions", "pin", "pins", "unpin"
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
    CommandSpec(name="help", summary="list the commands"),
    CommandSpec(
        name="new",
        summary="start a fresh session for this chat (the old one stays searchable)",
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
    CommandSpec(name="sessions", summary="recent sessions of this chat"),
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
)

_NAMES: frozenset[str] = frozenset(spec.name for spec in COMMANDS)
assert _NAMES == frozenset(get_args(CommandName)), "COMMANDS and CommandName disagree"


def _help_line(spec: CommandSpec) -> str:
    if not spec.argument:
        return f"/{spec.name}: {spec.summary}"
    shown = spec.argument.upper() if spec.argument_required else f"[{spec.argument}]"
    return f"/{spec.name} {shown}: {spec.summary}"


HELP_TEXT = "Commands:\n" + "\n".join(_help_line(spec) for spec in COMMANDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    name: CommandName
    argument: str = ""


def parse_command(text: str) -> Command | None:
    """`/name args` for a known command (a `@BotName` suffix is ignored); anything else is None."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, rest = stripped[1:].partition(" ")
    name = head.split("@", 1)[0].lower()
    if name not in _NAMES:
        return None
    return Command(name=name, argument=rest.strip())  # type: ignore[arg-type]
