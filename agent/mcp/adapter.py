"""An MCP server's tools as our `Tool`s: namespaced schemas, approval, results as text.

A tool `read_text` of server `files` becomes `files__read_text` (characters a provider refuses in
a function name become `_`; at most 64 characters). Its result goes back to the model as text:
text blocks as they are, structured content as JSON when the text does not already carry it,
images and other binary blocks as a one-line note. A result the server flags as an error is a
`ToolError`, so the model reads `Error: ...` as it does for our own tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agent.access import ApprovalRequest, mcp_tool_name
from agent.config_tools import McpServerConfig
from agent.errors import ToolError
from agent.providers.base import ToolSpec
from agent.tools.approval import decide_action
from agent.tools.registry import Tool, ToolContext

if TYPE_CHECKING:
    import mcp_types

__all__ = ["MAX_DESCRIPTION_CHARS", "format_result", "mcp_tool", "wire_name"]

MAX_DESCRIPTION_CHARS = 1_000
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")

CallTool = Callable[[str, dict[str, Any]], Awaitable["mcp_types.CallToolResult"]]


def wire_name(server: str, tool: str) -> str:
    """The name the model calls: `server__tool`, only [A-Za-z0-9_-], at most 64 characters."""
    return _NOT_IN_NAMES.sub("_", mcp_tool_name(server, tool))[:64]


def mcp_tool(server: str, config: McpServerConfig, tool: mcp_types.Tool, call: CallTool) -> Tool:
    """`tool` of `server` as one of ours (deferrable: it may hide behind the index)."""
    name = wire_name(server, tool.name)
    description = " ".join((tool.description or tool.title or tool.name).split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    asks = config.approval == "always" or tool.name in config.approval_tools
    original = tool.name

    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        if asks:
            await _approve(name, server, args, ctx)
        result = await call(original, args)
        text = format_result(result)
        if result.is_error:
            raise ToolError(text or f"{name} failed (the server gave no reason)")
        return _capped(text, ctx.max_output_chars)

    return Tool(
        spec=ToolSpec(name=name, description=f"[{server}] {description}", parameters=schema),
        handler=handler,
        deferrable=True,
    )


def format_result(result: mcp_types.CallToolResult) -> str:
    """The result's content blocks as text, structured content added as JSON when no text
    block already holds it."""
    parts = [_block_text(block) for block in result.content]
    structured = result.structured_content
    if structured is not None:
        as_json = json.dumps(structured, ensure_ascii=False, sort_keys=True)
        if not any(_says(p, structured) for p in parts):
            parts.append(as_json)
    return "\n".join(p for p in parts if p)


async def _approve(name: str, server: str, args: dict[str, Any], ctx: ToolContext) -> None:
    """Ask a person (the server or tool is marked `approval`); refuse where nobody can."""
    action = decide_action("destructive", mode=ctx.approval_policy, can_ask=ctx.can_ask)
    if action == "refuse":
        raise ToolError(
            f"{name} needs a person's approval (MCP server {server!r} is marked approval) and "
            "nobody can approve here; do not call it again in this conversation"
        )
    if action == "ask":
        subject = f"{name} {json.dumps(args, ensure_ascii=False, sort_keys=True)}"
        request = ApprovalRequest(kind="tool", subject=subject, reason=f"MCP server {server}")
        if not await ctx.approve(request):
            raise ToolError(f"the user denied {name}; do not retry it")


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        data = str(block.data)
        size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))  # base64 → bytes
        return f"[{kind}: {block.mime_type}, about {size:,} bytes, not shown]"
    if kind == "resource_link":
        return f"[resource: {block.uri}{' ' + block.name if block.name else ''}]"
    if kind == "resource":
        inner = block.resource
        text = getattr(inner, "text", None)
        return str(text) if text is not None else f"[resource: {inner.uri}, binary, not shown]"
    return f"[{kind or 'unknown'} content, not shown]"


def _says(text: str, value: object) -> bool:
    """`text` already carries `value`: as JSON, or as the text of a `{"result": ...}` wrapper
    (how SDK servers wrap a plain return value)."""
    if isinstance(value, dict) and len(value) == 1 and "result" in value:
        inner = value["result"]
        if isinstance(inner, str | int | float) and text == str(inner):
            return True
        value = inner
    try:
        return bool(json.loads(text) == value)
    except (ValueError, TypeError):
        return False


def _capped(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    return f"{text[:max_chars]}\n[... {cut:,} more characters cut; ask for less]"
