"""The lcm engine's tools: `lcm_grep` (a regex over the whole session) and `lcm_expand` (anchor to
rows, summaries included). Thin: the scanning and reading live behind `agent.plugin_api`."""

from __future__ import annotations

from typing import Any

from agent.plugin_api import (
    RECALL_MAX_CHARS,
    Tool,
    ToolContext,
    ToolError,
    ToolSpec,
    grep_archive,
    int_arg,
    parse_anchor,
    read_anchor,
    store_of,
)

__all__ = ["lcm_tools"]

_GREP = ToolSpec(
    name="lcm_grep",
    description=(
        "Search every message of this conversation, including everything summarized away, "
        "with a regular expression. Matches come oldest first with their row anchors (#1203); "
        "`context` adds the rows after each match; `page` continues."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "A regular expression."},
            "ignore_case": {"type": "boolean"},
            "context": {"type": "integer", "minimum": 0, "maximum": 20},
            "page": {"type": "integer", "minimum": 1},
        },
        "required": ["pattern"],
    },
)
_EXPAND = ToolSpec(
    name="lcm_expand",
    description=(
        "Expand a summary node's anchor (such as [#1203–#1219]) into the rows it stands for, "
        "word for word, older summaries included; `page` continues."
    ),
    parameters={
        "type": "object",
        "properties": {
            "anchor": {"type": "string", "description": "e.g. [#1203–#1219] or #1203"},
            "page": {"type": "integer", "minimum": 1},
        },
        "required": ["anchor"],
    },
)


def lcm_tools() -> list[Tool]:
    """Fresh tool values; each finds the store in `ctx.services["store"]` when called."""
    return [Tool(spec=_GREP, handler=_grep), Tool(spec=_EXPAND, handler=_expand)]


def _budget(ctx: ToolContext) -> int:
    return max(1_000, min(ctx.max_output_chars, RECALL_MAX_CHARS))


async def _grep(args: dict[str, Any], ctx: ToolContext) -> str:
    pattern = args.get("pattern")
    if not isinstance(pattern, str):
        raise ToolError("lcm_grep needs a 'pattern' string (a regular expression)")
    return await grep_archive(
        store_of(ctx, "lcm_grep"),
        ctx.session_id,
        pattern,
        ignore_case=args.get("ignore_case") is True,
        page=int_arg(args.get("page"), default=1, low=1, high=10_000),
        context=int_arg(args.get("context"), default=0, low=0, high=20),
        budget=_budget(ctx),
    )


async def _expand(args: dict[str, Any], ctx: ToolContext) -> str:
    raw = args.get("anchor")
    anchor = parse_anchor(raw) if isinstance(raw, str) else None
    if anchor is None:
        raise ToolError("lcm_expand needs an 'anchor' such as [#1203–#1219] or #1203")
    return await read_anchor(
        store_of(ctx, "lcm_expand"),
        ctx.session_id,
        anchor,
        page=int_arg(args.get("page"), default=1, low=1, high=10_000),
        budget=_budget(ctx),
        include_summaries=True,
        tool="lcm_expand",
    )
