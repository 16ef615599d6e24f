"""The model's `memory` tool: remember, update, forget, search and list, for the turn's person.

The handler finds an `OwnerMemory` in `ctx.services["memory"]`, put there by the agent for
a turn whose person has memory (never in a shared chat); it serves only the principal whose
turn it is. Nothing here can name another owner.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import structlog

from agent.errors import StoreError, ToolError
from agent.memory.view import MemoryRefused, OwnerMemory, Source
from agent.providers.base import ToolSpec
from agent.tools.registry import Tool, ToolContext
from state.values import MemoryEntry

__all__ = ["MAX_LIST_CHARS", "memory_tool", "parse_entry_id"]

log = structlog.get_logger(__name__)

MAX_LIST_CHARS = 8_000
SEARCH_LIMIT = 8
"""A search returns at most this many entries."""
_SPEC = ToolSpec(
    name="memory",
    description=(
        "Long-term memory of the person you talk to, kept across conversations. remember: a "
        "lasting fact (profile=true: who they are, how to answer them). update: correct entry "
        "`id`. forget: erase entry `id`. search: find notes. list: all. No secrets, no task "
        "details."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["remember", "update", "forget", "search", "list"],
            },
            "text": {"type": "string"},
            "profile": {"type": "boolean"},
            "id": {"type": "string", "description": "e.g. m12"},
            "query": {"type": "string"},
        },
        "required": ["action"],
    },
)


def memory_tool() -> Tool:
    """The tool to register; it serves the memory the agent bound to the turn. Deferrable:
    where a principal has many tools (MCP servers), it waits behind the `tool_search` index
    with them, so the default request stays small."""
    return Tool(spec=_SPEC, handler=_handle, deferrable=True)


def parse_entry_id(raw: object) -> int | None:
    """`m12`, `#12`, `12` or 12 -> 12; anything else None."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw > 0 else None
    if isinstance(raw, str):
        digits = raw.strip().lstrip("#mM[").rstrip("]").strip()
        if digits.isdigit() and 0 < len(digits) <= 15:
            return int(digits)
    return None


def describe(entry: MemoryEntry) -> str:
    day = datetime.fromtimestamp(entry.created_at, tz=UTC).strftime("%Y-%m-%d")
    return f"m{entry.id} ({entry.kind}, {day}): {entry.text}"


async def _handle(args: dict[str, Any], ctx: ToolContext) -> str:
    view = ctx.services.get("memory")
    principal = ctx.principal
    if not isinstance(view, OwnerMemory) or (
        principal is not None and principal.owner != view.owner
    ):
        raise ToolError(
            "memory is not available in this conversation (a shared chat, or memory is off)"
        )
    action = args.get("action")
    try:
        match action:
            case "remember":
                entry = await view.remember(
                    _text(args),
                    kind="profile" if args.get("profile") is True else "note",
                    origin="tool",
                    source=Source(session_id=ctx.session_id or None),
                )
                return f"Remembered as {describe(entry)}"
            case "update":
                old = _entry_id(args)
                entry = await view.remember(
                    _text(args),
                    origin="tool",
                    source=Source(session_id=ctx.session_id or None),
                    supersedes=old,
                )
                return f"Corrected m{old}; now {describe(entry)}"
            case "forget":
                gone = await view.forget(_entry_id(args))
                if gone is None:
                    raise ToolError("nothing is remembered under that id; list shows the ids")
                return f"Forgot m{gone.id}: {gone.text}"
            case "search":
                query = args.get("query") or args.get("text")
                if not isinstance(query, str) or not query.strip():
                    raise ToolError("search needs a non-empty 'query'")
                hits = await view.search(query, limit=SEARCH_LIMIT)
                if not hits:
                    return f"Nothing remembered matches {query[:80]!r}."
                return "\n".join(describe(h.entry) for h in hits)
            case "list":
                return _listing(await view.entries())
            case _:
                raise ToolError("action must be remember, update, forget, search or list")
    except MemoryRefused as exc:
        raise ToolError(f"nothing changed: {exc}") from exc
    except StoreError as exc:
        raise ToolError(f"memory is unavailable right now: {exc}") from exc


def _text(args: dict[str, Any]) -> str:
    text = args.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ToolError("this action needs a non-empty 'text'")
    return text


def _entry_id(args: dict[str, Any]) -> int:
    entry_id = parse_entry_id(args.get("id"))
    if entry_id is None:
        raise ToolError("this action needs the entry's 'id', such as m12")
    return entry_id


def _listing(entries: list[MemoryEntry]) -> str:
    if not entries:
        return "Nothing is remembered about this person yet."
    lines: list[str] = []
    used = 0
    for entry in entries:
        line = describe(entry)
        if used + len(line) > MAX_LIST_CHARS:
            lines.append(f"({len(entries) - len(lines)} more not shown; search finds them)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)
