"""The ledger's rules, pure: when an instruction repeats or replaces one, and how it is shown.

A new instruction that says what an active one says (same words, any case or spacing) is a
repeat and adds nothing. One about the same thing is a replacement ("supersedes"): the same
content words ("always use tabs" / "never use tabs", "use X, not Y" / "use Y, not X"), or
opposite polarity with most content words shared. Anything else is a new entry.

The ledger is shown inside the system message, between `LEDGER_START` and `LEDGER_END`: that
part of the head is never summarized, it is rewritten whole on every compaction, and it reads
as reference material, never as a new user turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from agent.messages import ChatMessage, with_system_block
from state.values import Instruction

__all__ = [
    "LEDGER_END",
    "LEDGER_PREAMBLE",
    "LEDGER_START",
    "MAX_ACTIVE_ENTRIES",
    "Addition",
    "Repeat",
    "apply_ledger",
    "directive_key",
    "plan_entry",
    "render_ledger",
    "strip_ledger",
]

MAX_ACTIVE_ENTRIES = 50
"""A full ledger takes no more entries until one is removed (`/unpin N`)."""
LEDGER_START = "=== STANDING INSTRUCTIONS ==="
LEDGER_END = "=== END OF STANDING INSTRUCTIONS ==="
LEDGER_PREAMBLE = (
    "[STANDING INSTRUCTIONS] The user gave these instructions earlier in this conversation and "
    "they still apply. They are kept here word for word, so that compaction cannot paraphrase "
    "them away. They are reference material, not a new request: the latest user message says "
    "what to do now, and a later instruction of the user overrides an earlier one."
)
Polarity: TypeAlias = Literal["positive", "negative", "contrast"]
_WORD_RE = re.compile(r"[\w']+")
_NEGATIVE = frozenset({"never", "don't", "dont", "not", "no", "stop", "avoid"})
_MARKERS = _NEGATIVE | frozenset({"always", "do", "only", "prefer", "instead", "rather", "than"})
_FILLER = frozenset(
    (
        "please from now on going forward in future the a an to of for with and or it one any "
        "you we should must make sure remember also also so ok okay be is are this that all "
        "every each"
    ).split()
)
_BLOCK_RE = re.compile(
    r"\s*" + re.escape(LEDGER_START) + r".*?" + re.escape(LEDGER_END) + r"[ \t]*", re.S
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Repeat:
    """The instruction is already in the ledger as `entry`."""

    entry: Instruction


@dataclass(frozen=True, slots=True, kw_only=True)
class Addition:
    """A new entry; `supersedes` is the active entry it replaces, if any."""

    text: str
    supersedes: Instruction | None = None


def directive_key(text: str) -> frozenset[str]:
    """What an instruction is about: its content words, without polarity and filler."""
    words = {w.strip("'") for w in _WORD_RE.findall(text.lower().replace("’", "'"))}
    return frozenset(w for w in words if w and w not in _MARKERS and w not in _FILLER)


def plan_entry(active: Sequence[Instruction], text: str) -> Repeat | Addition:
    """Whether `text` repeats an active entry, replaces one (the newest match), or is new."""
    normalized = _normalized(text)
    for entry in active:
        if _normalized(entry.text) == normalized:
            return Repeat(entry=entry)
    key, polarity = directive_key(text), _polarity(text)
    for entry in reversed(active):
        other = directive_key(entry.text)
        if key and key == other:
            return Addition(text=text, supersedes=entry)
        shared = key & other
        opposite = {polarity, _polarity(entry.text)} == {"positive", "negative"}
        if opposite and len(shared) >= 2 and len(shared) / len(key | other) >= 0.6:
            return Addition(text=text, supersedes=entry)
    return Addition(text=text)


def render_ledger(entries: Sequence[Instruction]) -> str:
    """The block shown in the system message; "" for an empty ledger."""
    if not entries:
        return ""
    lines = [LEDGER_START, LEDGER_PREAMBLE]
    for number, entry in enumerate(entries, start=1):
        source = f" [#{entry.source_message_id}]" if entry.source_message_id else ""
        pinned = " (pinned)" if entry.kind == "pin" else ""
        lines.append(f"{number}.{pinned} {entry.text}{source}")
    lines.append(LEDGER_END)
    return "\n".join(lines)


def strip_ledger(text: str) -> str:
    """`text` without a ledger block."""
    return _BLOCK_RE.sub("", text)


def apply_ledger(messages: list[ChatMessage], entries: Sequence[Instruction]) -> list[ChatMessage]:
    """`messages` with the system message's ledger block made current: the same list when
    nothing changes (or there is no system message), else a new list with a new first message."""
    return with_system_block(
        messages, render_ledger(entries), start=LEDGER_START, strip=strip_ledger
    )


def _normalized(text: str) -> str:
    return " ".join(_WORD_RE.findall(text.casefold().replace("’", "'")))


def _polarity(text: str) -> Polarity:
    words = set(_WORD_RE.findall(text.lower().replace("’", "'")))
    if "instead" in words or "rather" in words or re.search(r",\s*(?:not|never)\b", text, re.I):
        return "contrast"
    return "negative" if words & _NEGATIVE else "positive"
