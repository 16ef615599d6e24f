"""Pure conversions between messages and rows, session info from rows, and the compaction plan."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from state.store_errors import InvalidRecord
from state.values import MAX_ID_CHARS, ChatMessage, SessionInfo, content_text, storable

MAX_MODEL_CHARS = 255
MAX_TITLE_CHARS = 500
MAX_PLATFORM_CHARS = 32

__all__ = [
    "CompactionPlan",
    "estimate_tokens",
    "message_from_row",
    "plan_compaction",
    "row_from_message",
    "row_key",
    "session_fields",
    "session_info_from_row",
]

_MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name")
MEDIA_KEY = "_media"
"""The one metadata key the row keeps (in `extra`): `agent.media.refs` reads and writes it."""
_NOT_STORED = frozenset({*_MESSAGE_FIELDS, "cache_control"})
"""`cache_control` is a per-request cache breakpoint, not part of what was said."""

RowKey = tuple[Any, ...]
"""What makes two messages "the same": role, text, blocks, tool calls, tool_call_id, name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """How `archive_and_compact` turns the active rows into `new_active`."""

    carried: tuple[tuple[int, int], ...]
    """(index in new_active, row id) of rows that stay as they are, only renumbered."""
    inserted: tuple[int, ...]
    """Indexes in new_active written as new rows."""


def session_info_from_row(row: Mapping[Any, Any]) -> SessionInfo:
    return SessionInfo(
        **{name: row[name] for name in SessionInfo.__slots__ if name != "meta"},
        meta=dict(row["meta"] or {}),
    )


def estimate_tokens(msg: ChatMessage) -> int:
    """Rough chars/4 estimate of a message, tool calls included."""
    chars = len(content_text(msg))
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        chars += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", "")))
    return chars // 4 + 4


def session_fields(values: Mapping[str, str | None]) -> dict[str, str | None]:
    """A session's text fields as the store keeps them: storable text, within the columns (a
    title is cut, anything else too long is refused with InvalidRecord)."""
    out = {name: storable(value) for name, value in values.items()}
    if (title := out.get("title")) is not None and len(title) > MAX_TITLE_CHARS:
        out["title"] = title[: MAX_TITLE_CHARS - 1] + "…"
    for name, limit in _SESSION_LIMITS.items():
        _fits(name, out.get(name), limit)
    return out


_SESSION_LIMITS = {
    "platform": MAX_PLATFORM_CHARS,
    "chat_key": MAX_ID_CHARS,
    "user_id": MAX_ID_CHARS,
    "model": MAX_MODEL_CHARS,
    "owner": MAX_ID_CHARS,
}


def _fits(name: str, value: str | None, limit: int) -> None:
    if value is not None and len(value) > limit:
        raise InvalidRecord(name, limit=limit, got=len(value))


def row_from_message(
    msg: ChatMessage, *, session_id: str, position: int, now: float | None = None
) -> dict[str, Any]:
    """The `messages` row values for one message (no id; active, not compacted). Text that no
    database can keep (NUL, lone surrogates) is replaced; ids too long are InvalidRecord."""
    msg = storable(msg)
    _fits("tool_call_id", msg.get("tool_call_id"), MAX_ID_CHARS)
    _fits("name", msg.get("name"), MAX_ID_CHARS)
    content = msg.get("content")
    extra = {k: v for k, v in msg.items() if not k.startswith("_") and k not in _NOT_STORED}
    if media := msg.get("_media"):  # references to stored files, never bytes, stay with the row
        extra[MEDIA_KEY] = media
    created = msg.get("_created_at")
    return {
        "session_id": session_id,
        "position": position,
        "role": msg.get("role", ""),
        "content": content_text(msg) if content is not None else None,
        "blocks": list(content) if isinstance(content, list) else None,
        "tool_calls": list(msg["tool_calls"]) if msg.get("tool_calls") else None,
        "tool_call_id": msg.get("tool_call_id"),
        "name": msg.get("name"),
        "extra": extra or None,
        "created_at": float(created) if created is not None else (now or time.time()),
        "active": True,
        "compacted": False,
        "kind": msg.get("_kind", "normal"),
        "token_estimate": estimate_tokens(msg),
    }


def row_key(row: Mapping[Any, Any]) -> RowKey:
    """The identity of a stored message's content, comparable with `row_from_message` output."""
    return (
        row["role"],
        row["content"],
        row["blocks"] or None,
        row["tool_calls"] or None,
        row["tool_call_id"],
        row["name"],
    )


def message_from_row(row: Mapping[Any, Any], *, flags: bool = False) -> ChatMessage:
    """A canonical message with `_id`, `_persisted`, `_kind`, `_created_at` (and flags if asked)."""
    msg: dict[str, Any] = dict(row["extra"] or {})
    msg["role"] = row["role"]
    msg["content"] = row["blocks"] if row["blocks"] is not None else row["content"]
    if row["tool_calls"]:
        msg["tool_calls"] = row["tool_calls"]
    if row["tool_call_id"] is not None:
        msg["tool_call_id"] = row["tool_call_id"]
    if row["name"] is not None:
        msg["name"] = row["name"]
    msg["_id"] = int(row["id"])
    msg["_persisted"] = True
    msg["_kind"] = row["kind"]
    msg["_created_at"] = float(row["created_at"])
    if flags:
        msg["_active"] = bool(row["active"])
        msg["_compacted"] = bool(row["compacted"])
        if row["archived_by"] is not None:
            msg["_archived_by"] = row["archived_by"]
    return msg  # type: ignore[return-value]


def plan_compaction(
    new_active: Sequence[ChatMessage], active_keys: Mapping[int, RowKey]
) -> CompactionPlan:
    """Carry over a message whose `_id` is an active row with unchanged content; insert the rest.

    `active_keys` maps the ids of this session's active rows (those referenced by new_active)
    to their `row_key`. An id used twice is carried once; the second copy is inserted.
    """
    carried: list[tuple[int, int]] = []
    inserted: list[int] = []
    seen: set[int] = set()
    for index, msg in enumerate(new_active):
        row_id = msg.get("_id")
        if not isinstance(row_id, int):
            inserted.append(index)
            continue
        key = active_keys.get(row_id)
        if key is not None and row_id not in seen and key == _message_key(msg):
            carried.append((index, row_id))
            seen.add(row_id)
        else:
            inserted.append(index)
    return CompactionPlan(carried=tuple(carried), inserted=tuple(inserted))


def _message_key(msg: ChatMessage) -> RowKey:
    return row_key(row_from_message(msg, session_id="", position=0, now=0.0))
