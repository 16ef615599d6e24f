"""Archived rows as tool output: one block per row, verbatim, inside a character budget; pure.

Every block starts with the row's anchor (`#1203`), role, tool name and whether the row is still
in the active context. A block too long for its share keeps its start and end (test results and
errors usually sit at the end) with a note saying how much was left out and how to read it all.
Shares are water-filled: short rows keep everything, long ones split what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from agent.media.marks import media_mark, unmarked
from agent.media.refs import describe
from state.values import ArchivedRow

__all__ = ["MIN_ROW_CHARS", "allocate", "clip_middle", "render_row", "render_rows"]

MIN_ROW_CHARS = 240
"""No row is cut below this many characters of text, whatever the budget."""
MAX_ARGUMENT_CHARS = 400


def allocate(lengths: Sequence[int], budget: int, *, floor: int = MIN_ROW_CHARS) -> list[int]:
    """How many characters each of `lengths` may keep so the total fits `budget` (water-filling:
    an item shorter than the fair share keeps all of it, the rest split what remains)."""
    limits = [0] * len(lengths)
    pending = sorted(range(len(lengths)), key=lambda i: lengths[i])
    left = max(0, budget)
    while pending:
        share = max(floor, left // len(pending))
        index = pending[0]
        if lengths[index] <= share:
            limits[index] = lengths[index]
            left -= lengths[index]
            pending.pop(0)
            continue
        for index in pending:
            limits[index] = share
        break
    return limits


def clip_middle(text: str, limit: int, *, hint: str = "") -> str:
    """`text` within about `limit` characters: its start and end, and a note on what was cut."""
    if len(text) <= limit:
        return text
    keep = max(1, limit // 2)
    note = f"[… {len(text) - 2 * keep:,} characters omitted{hint} …]"
    return f"{text[:keep]}\n{note}\n{text[-keep:]}"


def render_row(row: ArchivedRow, limit: int) -> str:
    """One row's block: its header line, then its text (clipped to `limit`) and tool calls."""
    where = "active" if row.active else "archived"
    kind = " summary" if row.kind == "summary" else ""
    name = f" {row.name}" if row.role == "tool" and row.name else ""
    when = datetime.fromtimestamp(row.created_at, tz=UTC).strftime("%Y-%m-%d %H:%M")
    lines = [f"#{row.id} {row.role}{name}{kind} ({where}, {when})"]
    body = _row_text(row)
    if body:
        lines.append(clip_middle(body, limit, hint=f"; recall [#{row.id}] alone shows more"))
    for ref in row.media:  # what was attached, and a mark the media provider can sign
        if isinstance(ref, dict) and isinstance(ref.get("sha256"), str):
            lines.append(f"[attached: {describe(ref)}]")  # type: ignore[arg-type]
            if ref.get("kind") == "image":
                lines.append(media_mark(str(ref.get("owner", "")), ref["sha256"]))
    return "\n".join(lines)


def render_rows(rows: Sequence[ArchivedRow], budget: int) -> list[str]:
    """The blocks of `rows`, their text water-filled into `budget` characters."""
    limits = allocate([len(_row_text(r)) for r in rows], budget - 80 * len(rows))
    return [render_row(row, limit) for row, limit in zip(rows, limits, strict=True)]


def _row_text(row: ArchivedRow) -> str:
    parts = [unmarked(row.text)] if row.text else []
    for call in row.tool_calls:
        fn = call.get("function") or {}
        arguments = str(fn.get("arguments") or "")
        if len(arguments) > MAX_ARGUMENT_CHARS:
            arguments = arguments[:MAX_ARGUMENT_CHARS] + "…"
        parts.append(f"→ {fn.get('name', '?')}({arguments})")
    return "\n".join(parts)
