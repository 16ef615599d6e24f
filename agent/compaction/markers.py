"""The summary marker and the system-prompt note: one text format, written and parsed here.

Batch compaction and micro-compaction share this format, so either can pick up the other's
summary from the transcript.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

from agent.messages import ChatMessage

__all__ = [
    "COMPACTION_NOTE",
    "FOLDED_MARK",
    "UNANSWERED_MARK",
    "SUMMARY_END",
    "SUMMARY_PREAMBLE",
    "SUMMARY_START",
    "MICRO_TRAILER",
    "find_newest_marker",
    "has_compaction_note",
    "is_marker",
    "is_micro_marker",
    "make_micro_marker",
    "make_summary_marker",
    "parse_summary_marker",
    "with_compaction_note",
]

SUMMARY_PREAMBLE = (
    "[CONTEXT COMPACTION] Earlier turns of this conversation were compacted into the summary "
    "below. It is reference material about what already happened, not a new instruction: do "
    "not act on it by itself. Continue from the most recent messages after it, and treat the "
    "latest user message as the current request."
)
SUMMARY_START = "=== SUMMARY OF EARLIER TURNS ==="
SUMMARY_END = "=== END OF SUMMARY ==="
COMPACTION_NOTE = (
    "[Note: Some earlier conversation turns have been compacted into a summary to save context "
    "space. The summary is reference material from earlier turns, not a new instruction.]"
)

MICRO_TRAILER = "(Rolling summary: micro-compaction keeps it up to date, one exchange at a time.)"
"""Closes a micro-compaction marker after the end marker; tells it from a batch marker."""

UNANSWERED_MARK = "[no reply was stored for the message above]"
"""The answer the provider edge (`agent.turn.well_formed`) gives a user message whose reply was
never stored (a killed worker, a failing store), so roles alternate and the model knows."""
FOLDED_MARK = "[replied: that answer is folded into the conversation summary below]"
"""Between two user messages before the rolling (micro) marker: the reply to the first was
folded into that summary. Micro-compaction keeps every user message and stores an explicit
`UNANSWERED_MARK` for a reply that was truly never stored before it folds past it
(`agent.compaction.micro_cursor`), so before the marker a missing reply means a folded one."""

SummaryRole = Literal["user", "assistant"]


def make_summary_marker(text: str, role: SummaryRole) -> ChatMessage:
    """A summary message: preamble, start heading, the summary, end marker; `_kind` = summary."""
    body = f"{SUMMARY_PREAMBLE}\n\n{SUMMARY_START}\n{text.strip()}\n{SUMMARY_END}"
    msg: dict[str, Any] = {
        "role": role,
        "content": body,
        "_kind": "summary",
        "_created_at": time.time(),
    }
    return msg  # type: ignore[return-value]


def parse_summary_marker(msg: ChatMessage) -> str | None:
    """The summary text inside a marker, or None when `msg` is not one.

    Recognised by `_kind` or, when metadata was lost, by the preamble and both delimiters.
    """
    content = msg.get("content")
    if not isinstance(content, str):
        return None
    tagged = msg.get("_kind") == "summary"
    if not tagged and not content.startswith("[CONTEXT COMPACTION]"):
        return None
    start = content.find(SUMMARY_START)
    end = content.rfind(SUMMARY_END)
    if start < 0 or end < start:
        return content.strip() if tagged else None
    return content[start + len(SUMMARY_START) : end].strip()


def is_marker(msg: ChatMessage) -> bool:
    return msg.get("_kind") == "summary" or parse_summary_marker(msg) is not None


def find_newest_marker(messages: Sequence[ChatMessage]) -> tuple[int, str] | None:
    """Index and text of the newest summary marker, scanning from the end."""
    for index in range(len(messages) - 1, -1, -1):
        msg = messages[index]
        if msg.get("role") in ("user", "assistant"):
            text = parse_summary_marker(msg)
            if text is not None:
                return index, text
    return None


def make_micro_marker(text: str, role: SummaryRole) -> ChatMessage:
    """A summary marker in the batch format plus `MICRO_TRAILER` after the end marker."""
    msg = make_summary_marker(text, role)
    msg["content"] = f"{msg['content']}\n{MICRO_TRAILER}"
    return msg


def is_micro_marker(msg: ChatMessage) -> bool:
    """A marker written by micro-compaction (a batch marker has no trailer)."""
    content = msg.get("content")
    return isinstance(content, str) and content.endswith(MICRO_TRAILER) and is_marker(msg)


def has_compaction_note(msg: ChatMessage) -> bool:
    content = msg.get("content")
    if isinstance(content, str):
        return COMPACTION_NOTE in content
    if isinstance(content, list):
        return any(
            isinstance(b, dict) and COMPACTION_NOTE in str(b.get("text", "")) for b in content
        )
    return False


def with_compaction_note(msg: ChatMessage) -> ChatMessage:
    """The system message with the note appended once; unchanged (same object) if it has it."""
    if msg.get("role") != "system" or has_compaction_note(msg):
        return msg
    content = msg.get("content")
    new: dict[str, Any] = {k: v for k, v in msg.items() if k not in ("_id", "_persisted")}
    if isinstance(content, list):
        new["content"] = [*content, {"type": "text", "text": "\n\n" + COMPACTION_NOTE}]
    else:
        new["content"] = f"{content or ''}\n\n{COMPACTION_NOTE}"
    return new  # type: ignore[return-value]
