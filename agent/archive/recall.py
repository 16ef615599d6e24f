"""The `recall` tool: archived rows of this session back verbatim, by summary anchor or by query.

Summaries cite the rows they stand for as anchors (`[#1203–#1219]`); `recall(anchor=…)` reads a
range page by page. `recall(query=…)` goes through the store's search (the very path
`session_search` uses) and returns the matching rows themselves, each optionally followed by the
rows after it (`context`), which is how the rest of an exchange comes back. Output is bounded:
long rows keep their start and end with a note, and every page says how to get the next one.
"""

from __future__ import annotations

import json
from typing import Any

import structlog

from agent.archive.anchors import Anchor, parse_anchor
from agent.archive.render import render_rows
from agent.errors import StoreError, ToolError
from agent.media.marks import MARK_OPEN, sign_marks
from agent.providers.base import ToolSpec
from agent.tools.args import int_arg, store_of
from agent.tools.registry import Tool, ToolContext
from state.contract import SessionView
from state.values import ArchivedRow

__all__ = [
    "MAX_CONTEXT_ROWS",
    "PAGE_HITS",
    "PAGE_ROWS",
    "RECALL_MAX_CHARS",
    "next_page_note",
    "read_anchor",
    "recall_tool",
]

log = structlog.get_logger(__name__)

RECALL_MAX_CHARS = 16_000
"""The most one call returns (less when `tools.max_output_chars` is lower)."""
PAGE_ROWS = 12
"""Rows of an anchor range per page."""
PAGE_HITS = 4
"""Matches of a query per page."""
MAX_CONTEXT_ROWS = 20

_SPEC = ToolSpec(
    name="recall",
    description=(
        "Read earlier messages of this conversation back word for word, including ones that "
        "were summarized away. Give `anchor` (a summary's citation such as [#1203–#1219], or "
        "one row id) or `query` (words to search for). `context` adds the rows that followed "
        "each match, e.g. the rest of that exchange. Long output is cut with a note; `page` "
        "continues."
    ),
    parameters={
        "type": "object",
        "properties": {
            "anchor": {"type": "string", "description": "e.g. [#1203–#1219] or #1203"},
            "query": {"type": "string", "description": "Words to look for."},
            "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT_ROWS},
            "page": {"type": "integer", "minimum": 1},
        },
    },
)


def recall_tool() -> Tool:
    """The tool to register; it finds the store in `ctx.services["store"]` at call time."""
    return Tool(spec=_SPEC, handler=_handle)


async def _handle(args: dict[str, Any], ctx: ToolContext) -> str:
    anchor_text, query = args.get("anchor"), args.get("query")
    page = int_arg(args.get("page"), default=1, low=1, high=10_000)
    context = int_arg(args.get("context"), default=0, low=0, high=MAX_CONTEXT_ROWS)
    budget = max(1_000, min(ctx.max_output_chars, RECALL_MAX_CHARS))
    store = store_of(ctx, "recall")
    try:
        if isinstance(anchor_text, str) and anchor_text.strip():
            anchor = parse_anchor(anchor_text)
            if anchor is None:
                raise ToolError(
                    f"recall: {anchor_text[:60]!r} is not an anchor; use e.g. [#1203–#1219] or #1203"
                )
            text = await read_anchor(
                store, ctx.session_id, anchor, page=page, context=context, budget=budget
            )
        elif isinstance(query, str) and query.strip():
            text = await _by_query(store, ctx.session_id, query, page, context, budget)
        else:
            raise ToolError("recall needs an 'anchor' (such as [#1203–#1219]) or a 'query'")
    except StoreError as exc:
        raise ToolError(f"recall failed: {exc}") from exc
    log.info("archive_recalled", session_id=ctx.session_id, by="anchor" if anchor_text else "query")
    signer = ctx.services.get("media")
    if signer is not None and MARK_OPEN in text:  # images come back for a model that sees
        text = sign_marks(text, signer.sign)
    return text


async def read_anchor(
    store: SessionView,
    session_id: str,
    anchor: Anchor,
    *,
    page: int = 1,
    context: int = 0,
    budget: int = RECALL_MAX_CHARS,
    include_summaries: bool = False,
    tool: str = "recall",
) -> str:
    """One page of an anchor's rows as tool output (also `lcm_expand`'s, named by `tool`);
    `context` adds the rows after the range on its last page."""
    offset = (page - 1) * PAGE_ROWS
    rows = await store.read_rows(
        session_id,
        first_id=anchor.first,
        last_id=anchor.last,
        limit=PAGE_ROWS + 1,
        offset=offset,
        include_summaries=include_summaries,
    )
    more = len(rows) > PAGE_ROWS
    rows = rows[:PAGE_ROWS]
    if context and not more:
        rows += await store.read_rows(session_id, first_id=anchor.last + 1, limit=context)
    if not rows:
        where = f"page {page} of {anchor}" if page > 1 else str(anchor)
        return f"No rows of this conversation in {where}."
    head = f"{tool} {anchor}, page {page}: {len(rows)} row(s), oldest first."
    tail = (
        next_page_note(tool, {"anchor": str(anchor), "page": page + 1})
        if more
        else "(end of range)"
    )
    return "\n\n".join([head, *render_rows(rows, budget - len(head) - len(tail)), tail])


async def _by_query(
    store: SessionView, session_id: str, query: str, page: int, context: int, budget: int
) -> str:
    wanted = page * PAGE_HITS + 1
    hits = await store.search(
        query, session_id=session_id, limit=min(200, wanted), superseded_summaries=False
    )
    shown = hits[(page - 1) * PAGE_HITS : page * PAGE_HITS]
    if not shown:
        where = f" on page {page}" if page > 1 else ""
        return f"No messages of this conversation match {query[:80]!r}{where}."
    blocks: list[list[ArchivedRow]] = []
    for hit in shown:
        blocks.append(await store.read_rows(session_id, first_id=hit.message_id, limit=1 + context))
    more = len(hits) > page * PAGE_HITS
    head = f"recall {query[:80]!r}, page {page}: {len(shown)} match(es), best first."
    args = {"query": query[:200], "context": context, "page": page + 1}
    tail = next_page_note("recall", args) if more else ""
    share = (budget - len(head) - len(tail)) // len(blocks)
    parts = [head]
    for n, rows in enumerate(blocks, start=1):
        parts.append(f"— match {n} —\n" + "\n\n".join(render_rows(rows, share)))
    if tail:
        parts.append(tail)
    return "\n\n".join(parts)


def next_page_note(tool: str, args: dict[str, Any]) -> str:
    """`More: tool("arg": value, ...)`: how to get the next page (empty arguments left out)."""
    shown = {k: v for k, v in args.items() if v or k == "page"}
    return f"More: {tool}({json.dumps(shown, ensure_ascii=False)[1:-1]})"
