"""Canonical chat messages: OpenAI-style dicts plus metadata keys that never go on the wire.

Every layer speaks this one form. Providers convert at their edge:

- ``role``: ``system`` | ``user`` | ``assistant`` | ``tool``
- ``content``: a string, ``None`` (assistant with only tool calls), or a list of content
  blocks ``{"type": "text", "text": ...}`` (a block may carry ``cache_control``)
- ``tool_calls`` (assistant): ``[{"id", "type": "function", "function": {"name", "arguments"}}]``
  with ``arguments`` a JSON string, exactly as the OpenAI wire has it
- ``tool_call_id`` and ``name`` (tool results)
- ``cache_control`` (top level, set only by ``agent.prompt_caching``): a cache breakpoint on a
  message whose content has no block to carry it (tool results, assistant tool-call messages).
  Providers move it onto the last block they emit for that message.

Metadata keys start with ``_`` and are stripped by `to_wire`:

- ``_id``: the store's row id once persisted
- ``_persisted``: True once the store holds this exact message (appends skip it)
- ``_kind``: ``"normal"`` (default) or ``"summary"`` (a compaction marker)
- ``_created_at``: epoch seconds when the message was made
- ``_media``: references to stored files (photos, voice notes, documents) the message carries,
  by owner and sha256, never their bytes (`agent.media.refs`); the store keeps them with the row
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from state.values import ChatMessage, MessageKind, ToolCall, ToolFunction, content_text

__all__ = [
    "ChatMessage",
    "MessageKind",
    "ToolCall",
    "ToolFunction",
    "assistant_message",
    "content_text",
    "is_real_user_message",
    "is_summary_marker",
    "new_message",
    "strip_meta",
    "system_message",
    "tool_call_ids",
    "tool_message",
    "user_message",
    "with_system_block",
]


def new_message(role: str, content: str | list[dict[str, Any]] | None, **extra: Any) -> ChatMessage:
    """Build a message stamped with its creation time."""
    msg: dict[str, Any] = {"role": role, "content": content, **extra}
    msg.setdefault("_created_at", time.time())
    return msg  # type: ignore[return-value]


def system_message(text: str) -> ChatMessage:
    return new_message("system", text)


def user_message(text: str) -> ChatMessage:
    return new_message("user", text)


def assistant_message(text: str | None, tool_calls: Sequence[ToolCall] = ()) -> ChatMessage:
    msg = new_message("assistant", text)
    if tool_calls:
        msg["tool_calls"] = list(tool_calls)
    return msg


def tool_message(tool_call_id: str, name: str, text: str) -> ChatMessage:
    return new_message("tool", text, tool_call_id=tool_call_id, name=name)


def strip_meta(msg: ChatMessage) -> dict[str, Any]:
    """The wire form: the message without our `_` metadata keys."""
    return {k: v for k, v in msg.items() if not k.startswith("_")}


def is_summary_marker(msg: ChatMessage) -> bool:
    return msg.get("_kind") == "summary"


def is_real_user_message(msg: ChatMessage) -> bool:
    """A message the user typed (not a summary marker that happens to carry the user role)."""
    return msg.get("role") == "user" and not is_summary_marker(msg)


def tool_call_ids(msg: ChatMessage) -> list[str]:
    return [c["id"] for c in msg.get("tool_calls") or ()]


def dumps_arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def iter_wire(messages: Iterable[ChatMessage]) -> list[dict[str, Any]]:
    return [strip_meta(m) for m in messages]


def with_system_block(
    messages: list[ChatMessage], block: str, *, start: str, strip: Callable[[str], str]
) -> list[ChatMessage]:
    """`messages` with the system message's block (the one whose text begins with `start`, which
    `strip` removes from plain text) made `block` ("" removes it): the same list when nothing
    changes (or there is no system message), else a new list with a new first message."""
    if not messages or messages[0].get("role") != "system":
        return messages
    first = messages[0]
    content = first.get("content")
    new_content: Any
    if isinstance(content, list):
        kept = [b for b in content if not _starts_with(b, start)]
        new_content = [*kept, {"type": "text", "text": block}] if block else kept
    else:
        base = strip(content or "").rstrip()
        new_content = f"{base}\n\n{block}" if block else base
    if new_content == content:
        return messages
    new: dict[str, Any] = {k: v for k, v in first.items() if k not in ("_id", "_persisted")}
    new["content"] = new_content
    return [new, *messages[1:]]  # type: ignore[list-item]


def _starts_with(block: object, start: str) -> bool:
    return isinstance(block, dict) and str(block.get("text", "")).startswith(start)
