"""The `session_search` tool: the model looks up what was said or done earlier, archived rows too.

The store comes from `ToolContext.services["store"]`: a view bound to the turn's owner, so only
that person's (or that group chat's) sessions are searched. Results are short snippets citing the
session id and message id of every hit, marking hits that compaction has archived; `recall`
reads the same search back as whole rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from agent.errors import StoreError, ToolError
from agent.providers.base import ToolSpec
from agent.tools.args import int_arg, store_of
from agent.tools.registry import Tool, ToolContext

__all__ = ["Hit", "format_hits", "session_search_tool"]

log = structlog.get_logger(__name__)

MAX_RESULT_CHARS = 1500
DEFAULT_LIMIT = 5
MAX_LIMIT = 10
_SNIPPET_CHARS = 240

_SPEC = ToolSpec(
    name="session_search",
    description=(
        "Full-text search over everything said or done in this user's earlier conversations, "
        "including parts that were summarized away. Returns short snippets citing session and "
        "message ids."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "session_only": {
                "type": "boolean",
                "description": "Search only the current session (default: all sessions).",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        },
        "required": ["query"],
    },
)


class Hit(Protocol):
    """What `format_hits` reads of a search hit (the store's `SearchHit` has it)."""

    @property
    def session_id(self) -> str: ...
    @property
    def message_id(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def snippet(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def active(self) -> bool: ...


def format_hits(query: str, hits: Sequence[Hit], *, budget: int = MAX_RESULT_CHARS) -> str:
    """One line per hit in rank order, citing session and message ids; at most `budget` chars."""
    if not hits:
        return f"No earlier messages match {query[:80]!r}."
    lines = [f"{len(hits)} match(es) for {query[:80]!r}:"]
    used = len(lines[0])
    for hit in hits:
        when = datetime.fromtimestamp(hit.created_at, tz=UTC).strftime("%Y-%m-%d")
        state = "archived" if not hit.active else "active"
        snippet = " ".join(hit.snippet.split())
        if len(snippet) > _SNIPPET_CHARS:
            snippet = snippet[: _SNIPPET_CHARS - 1] + "…"
        line = f"- session {hit.session_id} msg {hit.message_id} ({hit.role}, {when}, {state}): {snippet}"
        if used + 1 + len(line) > budget:
            omitted = len(hits) - (len(lines) - 1)
            note = f"({omitted} more not shown)"
            if used + 1 + len(note) <= budget:
                lines.append(note)
            break
        lines.append(line)
        used += 1 + len(line)
    return "\n".join(lines)


async def _handle(args: dict[str, Any], ctx: ToolContext) -> str:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("session_search needs a non-empty 'query' string")
    store = store_of(ctx, "session_search")
    session_id = ctx.session_id if args.get("session_only") is True else None
    try:
        hits = await store.search(
            query,
            session_id=session_id,
            limit=int_arg(args.get("limit"), default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT),
            superseded_summaries=False,
        )
    except StoreError as exc:
        raise ToolError(f"session search failed: {exc}") from exc
    log.info("session_searched", session_id=ctx.session_id, hits=len(hits), scoped=bool(session_id))
    return format_hits(query, hits)


def session_search_tool() -> Tool:
    """The tool to register; it finds the store in `ctx.services["store"]` at call time."""
    return Tool(spec=_SPEC, handler=_handle)
