"""A regular-expression scan over a whole session's archive, page by page: `lcm_grep`'s engine.

The pattern comes from the model, so it is hostile input: it is compiled with the `regex`
module, and every match attempt runs in a worker thread (the GIL released) under a time limit,
so a pattern that backtracks without end (`(a+)+$`) costs a bounded moment, not a stuck worker. Rows are read
from the store in id order, so matches come oldest first and a page is stable.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import regex

from agent.archive.recall import next_page_note
from agent.archive.render import clip_middle, render_rows
from agent.errors import ToolError
from state.contract import SessionView
from state.values import ArchivedRow

__all__ = ["GREP_PAGE", "MAX_PATTERN_CHARS", "grep_archive"]

GREP_PAGE = 10
"""Matching rows per page (fewer when each brings `context` rows along)."""
MAX_PATTERN_CHARS = 500
MAX_SCAN_S = 10.0
"""The most one call spends scanning; what is left is reported as not searched."""
ROW_TIMEOUT_S = 0.05
"""The most one row may take to match (a runaway pattern is stopped here)."""
MAX_ROW_CHARS = 100_000
_READ_BATCH = 500
_LINES_PER_MATCH = 3
_LINE_CHARS = 240


@dataclass(frozen=True, slots=True, kw_only=True)
class _Hit:
    row: ArchivedRow
    lines: tuple[str, ...]


@dataclass(slots=True)
class _Scan:
    hits: list[_Hit]
    scanned: int = 0
    stopped: str = ""
    """Why the scan ended early ("" when it reached the end or had enough)."""


async def grep_archive(
    store: SessionView,
    session_id: str,
    pattern: str,
    *,
    ignore_case: bool = False,
    page: int = 1,
    context: int = 0,
    budget: int = 16_000,
    tool: str = "lcm_grep",
) -> str:
    """Rows of the session whose text matches `pattern`, oldest first, with the matching lines
    (and the `context` rows after each); one page, as tool output."""
    compiled = _compile(pattern, ignore_case)
    per_page = GREP_PAGE if not context else max(2, GREP_PAGE // (1 + context // 2))
    scan = await _scan(store, session_id, compiled, page * per_page + 1)
    shown = scan.hits[(page - 1) * per_page : page * per_page]
    label = f"{tool} /{pattern[:80]}/{'i' if ignore_case else ''}"
    if not shown:
        where = f" on page {page}" if page > 1 else ""
        return f"{label}: no rows of this conversation match{where} ({scan.scanned} scanned).{_why(scan)}"
    parts = [f"{label}, page {page}: {len(shown)} matching row(s), oldest first."]
    share = budget // len(shown)
    for hit in shown:
        block = [_hit_header(hit), *(f"  | {line}" for line in hit.lines)]
        if context:
            after = await store.read_rows(session_id, first_id=hit.row.id + 1, limit=context)
            block.extend(render_rows(after, share))
        parts.append("\n".join(block))
    if len(scan.hits) > page * per_page:
        args = {"pattern": pattern, "ignore_case": ignore_case, "context": context}
        parts.append(next_page_note(tool, {**args, "page": page + 1}))
    elif scan.stopped:
        parts.append(_why(scan).strip())
    return "\n\n".join(parts)


def _compile(pattern: str, ignore_case: bool) -> regex.Pattern[str]:
    if not pattern:
        raise ToolError("lcm_grep needs a non-empty 'pattern' (a regular expression)")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    flags = regex.MULTILINE | (regex.IGNORECASE if ignore_case else 0)
    try:
        return regex.compile(pattern, flags)
    except (regex.error, ValueError, OverflowError) as exc:
        raise ToolError(f"the pattern is not a valid regular expression: {exc}") from exc


async def _scan(
    store: SessionView, session_id: str, compiled: regex.Pattern[str], wanted: int
) -> _Scan:
    scan = _Scan(hits=[])
    deadline = time.monotonic() + MAX_SCAN_S
    after = 0
    while len(scan.hits) < wanted:
        rows = await store.read_rows(session_id, first_id=after + 1, limit=_READ_BATCH)
        if not rows:
            break
        found, stopped = await asyncio.to_thread(_match_rows, compiled, rows, deadline)
        scan.hits.extend(found)
        scan.scanned += len(rows)
        after = rows[-1].id
        if stopped:
            scan.stopped = stopped
            break
    return scan


def _match_rows(
    compiled: regex.Pattern[str], rows: Sequence[ArchivedRow], deadline: float
) -> tuple[list[_Hit], str]:
    """Worker-thread side: the matching rows of one batch, and why it stopped early if it did."""
    hits: list[_Hit] = []
    for row in rows:
        if time.monotonic() > deadline:
            return hits, f"stopped after {MAX_SCAN_S:g} s"
        text = _text(row)[:MAX_ROW_CHARS]
        try:
            lines = _matching_lines(compiled, text)
        except TimeoutError:
            return hits, f"the pattern took too long on row #{row.id}; simplify it"
        if lines:
            hits.append(_Hit(row=row, lines=lines))
    return hits, ""


def _matching_lines(compiled: regex.Pattern[str], text: str) -> tuple[str, ...]:
    lines: list[str] = []
    for match in compiled.finditer(text, concurrent=True, timeout=ROW_TIMEOUT_S):
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        line = text[start : end if end >= 0 else len(text)]
        if line not in lines:
            lines.append(clip_middle(line, _LINE_CHARS))
        if len(lines) == _LINES_PER_MATCH:
            break
    return tuple(lines)


def _text(row: ArchivedRow) -> str:
    calls = [
        f"→ {c['function']['name']}({c['function'].get('arguments') or ''})"
        for c in row.tool_calls
        if isinstance(c, dict) and isinstance(c.get("function"), dict)
    ]
    return "\n".join([row.text, *calls]) if calls else row.text


def _hit_header(hit: _Hit) -> str:
    where = "active" if hit.row.active else "archived"
    name = f" {hit.row.name}" if hit.row.role == "tool" and hit.row.name else ""
    return f"#{hit.row.id} {hit.row.role}{name} ({where})"


def _why(scan: _Scan) -> str:
    return f" The scan {scan.stopped}." if scan.stopped else ""
