"""Chat commands, the same on every platform: parsing is pure; the runner carries them out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["HELP_TEXT", "Command", "CommandName", "parse_command"]

CommandName: TypeAlias = Literal[
    "help", "new", "compress", "status", "model", "sessions", "pin", "pins", "unpin"
]

_NAMES: frozenset[str] = frozenset(
    {"help", "new", "compress", "status", "model", "sessions", "pin", "pins", "unpin"}
)

HELP_TEXT = """Commands:
/help: this list
/new: start a fresh session for this chat (the old one stays searchable)
/compress [focus]: compact older context now, optionally focused on a topic
/status: model, tokens, window occupancy, compactions, cache hits, cost
/model NAME: switch model (admins; the prompt cache starts cold)
/sessions: recent sessions of this chat
/pin TEXT: keep TEXT as a standing instruction, word for word, through every compaction
/pins: the standing instructions of this session
/unpin N: drop standing instruction number N (see /pins)"""


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
