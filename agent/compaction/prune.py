"""Phase 1: clear long old tool results; as a last resort, cut the ones a compaction must keep.

No model call. Every changed message is a new dict without `_id`/`_persisted`, so the store
archives the original row (searchable) and inserts the shortened one.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from typing import Any

from agent.messages import ChatMessage, content_text

__all__ = [
    "MIN_KEPT_TOKENS",
    "PRUNED_TOOL_OUTPUT",
    "PRUNE_MIN_CHARS",
    "prune_tool_results",
    "truncate_tool_results",
    "truncation_note",
]

PRUNED_TOOL_OUTPUT = "[Old tool output cleared to save context space]"
PRUNE_MIN_CHARS = 200
"""Tool results longer than this are cleared; shorter ones are cheaper to keep than to lose."""
MIN_KEPT_TOKENS = 48
"""A cut tool result keeps at least this much of its head and tail, around the note."""


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


def truncation_note(cut_chars: int) -> str:
    """What stands where a tool output was cut: how much, and that nothing is lost."""
    return (
        f"\n[... {cut_chars:,} characters of this tool output were cut to fit the model's "
        "context window; the full output stays in the session archive (session_search) ...]\n"
    )


def truncate_tool_results(
    messages: Sequence[ChatMessage],
    start: int,
    end: int,
    *,
    room_tokens: int,
    measure: Callable[[ChatMessage], int],
) -> tuple[list[ChatMessage], int]:
    """Cut the tool results in `messages[start:end]` so that together they take `room_tokens`.

    The room is shared out by water-filling: results smaller than their share stay whole (same
    object), the larger ones are cut to one common size, each keeping its head and tail (at
    least MIN_KEPT_TOKENS) around a note. Returns the new list and how many were cut.
    """
    out = list(messages)
    indices = [i for i in range(max(0, start), min(end, len(out))) if out[i].get("role") == "tool"]
    sizes = {i: measure(out[i]) for i in indices}
    if sum(sizes.values()) <= room_tokens or not indices:
        return out, 0
    # Aim a little under the room: a cut message's count rounds (chars to tokens, per-message
    # overhead), and landing one token over would refuse the whole plan.
    cap = _water_level(sorted(sizes.values()), int(room_tokens * 0.97) - 4 * len(indices))
    note_tokens = measure({"role": "tool", "content": truncation_note(10**9)})
    cut = 0
    for index in indices:
        target = max(MIN_KEPT_TOKENS, cap - note_tokens)
        if target + note_tokens >= sizes[index]:
            continue  # within its share, or cutting would not make it smaller
        text = content_text(out[index])
        keep_chars = max(1, len(text) * target // max(1, sizes[index]))
        head, tail = text[: keep_chars * 2 // 3], text[len(text) - keep_chars // 3 :]
        new: dict[str, Any] = {
            k: v for k, v in out[index].items() if k not in ("_id", "_persisted")
        }
        new["content"] = head + truncation_note(len(text) - len(head) - len(tail)) + tail
        out[index] = new  # type: ignore[call-overload]
        cut += 1
    return out, cut


def _water_level(sizes: Sequence[int], room: int) -> int:
    """The common size `c` with sum(min(size, c)) == room, for `sizes` sorted ascending."""
    remaining = max(0, room)
    for position, size in enumerate(sizes):
        share = remaining // (len(sizes) - position)
        if size > share:
            return share
        remaining -= size
    return max(sizes, default=0)
