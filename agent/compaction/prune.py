"""Phase 1: replace long old tool results with a fixed placeholder (no model call)."""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Any

from agent.messages import ChatMessage, content_text

__all__ = ["PRUNED_TOOL_OUTPUT", "PRUNE_MIN_CHARS", "prune_tool_results"]

PRUNED_TOOL_OUTPUT = "[Old tool output cleared to save context space]"
PRUNE_MIN_CHARS = 200
"""Tool results longer than this are cleared; shorter ones are cheaper to keep than to lose."""


def prune_tool_results(
    messages: Sequence[ChatMessage],
    start: int,
    end: int,
    *,
    keep: Container[int] = (),
    min_chars: int = PRUNE_MIN_CHARS,
) -> tuple[list[ChatMessage], int]:
    """Clear tool results in `messages[start:end]` longer than `min_chars`, except indices in `keep`.

    Returns the new list (unchanged messages are the same objects) and how many were cleared.
    A cleared message is a new dict without `_id`/`_persisted`: it is no longer the stored row.
    """
    out = list(messages)
    cleared = 0
    for index in range(max(0, start), min(end, len(out))):
        msg = out[index]
        if msg.get("role") != "tool" or index in keep:
            continue
        if len(content_text(msg)) <= min_chars or msg.get("content") == PRUNED_TOOL_OUTPUT:
            continue
        new: dict[str, Any] = {k: v for k, v in msg.items() if k not in ("_id", "_persisted")}
        new["content"] = PRUNED_TOOL_OUTPUT
        out[index] = new  # type: ignore[call-overload]
        cleared += 1
    return out, cleared
