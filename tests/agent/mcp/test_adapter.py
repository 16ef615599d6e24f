"""MCP tools as ours, the pure part: names, schemas, and results as text (built from the SDK's
own `mcp_types` values, as a server would send them).

Contract (MCP specification 2025-06-18, "Tools"): content blocks are `text`, `image` and
`audio` (base64 `data` with `mimeType`), `resource_link` (`uri`, `name`) and `resource` (an
embedded resource: `text` or `blob`); `structuredContent` is a JSON object.
"""

from __future__ import annotations

import base64
from typing import Any

import mcp_types
import pytest

from agent.config_tools import McpServerConfig
from agent.errors import ToolError
from agent.mcp.adapter import MAX_DESCRIPTION_CHARS, format_result, mcp_tool, wire_name
from agent.tools.registry import ToolContext


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("files", "read_text", "files__read_text"),
        ("ev", "get-sum", "ev__get-sum"),
        ("gh", "repos.list/all", "gh__repos_list_all"),
        ("x", "日本語", "x_____"),
        ("s", "t" * 100, "s__" + "t" * 61),
    ],
)
def test_wire_names_are_namespaced_and_safe_for_every_provider(
    server: str, tool: str, expected: str
) -> None:
    """`server__tool`, only [A-Za-z0-9_-], at most 64 characters."""
    assert wire_name(server, tool) == expected


def _result(*content: Any, structured: Any = None, error: bool = False) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=list(content), structured_content=structured, is_error=error
    )


def test_every_content_kind_becomes_text() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    result = _result(
        mcp_types.TextContent(type="text", text="hello"),
        mcp_types.ImageContent(type="image", data=png, mime_type="image/png"),
        mcp_types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a.txt"),
        mcp_types.EmbeddedResource(
            type="resource",
            resource=mcp_types.TextResourceContents(uri="file:///b.txt", text="inside b"),
        ),
        mcp_types.EmbeddedResource(
            type="resource",
            resource=mcp_types.BlobResourceContents(uri="file:///c.bin", blob=png),
        ),
    )
    assert format_result(result).splitlines() == [
        "hello",
        "[image: image/png, about 100 bytes, not shown]",
        "[resource: file:///a.txt a.txt]",
        "inside b",
        "[resource: file:///c.bin, binary, not shown]",
    ]


@pytest.mark.parametrize(
    ("text", "structured", "expected"),
    [
        ('{"b": 2, "a": 1}', {"a": 1, "b": 2}, '{"b": 2, "a": 1}'),
        ("42", {"result": 42}, "42"),
        ("done", {"result": "done"}, "done"),
        ("see below", {"a": 1}, 'see below\n{"a": 1}'),
    ],
)
def test_structured_content_is_added_only_when_no_text_says_it(
    text: str, structured: Any, expected: str
) -> None:
    result = _result(mcp_types.TextContent(type="text", text=text), structured=structured)
    assert format_result(result) == expected


def _tool(**fields: Any) -> mcp_types.Tool:
    return mcp_types.Tool(
        name=fields.pop("name", "t"), input_schema=fields.pop("input_schema", {}), **fields
    )


async def test_an_error_result_is_a_tool_error_and_long_results_are_cut() -> None:
    results = iter(
        [
            _result(mcp_types.TextContent(type="text", text="disk full"), error=True),
            _result(mcp_types.TextContent(type="text", text="x" * 5_000)),
        ]
    )

    async def call(name: str, args: dict[str, Any]) -> mcp_types.CallToolResult:
        return next(results)

    tool = mcp_tool("srv", McpServerConfig(command="x"), _tool(description="D"), call)
    ctx = ToolContext(session_id="s", max_output_chars=1_000)
    with pytest.raises(ToolError, match="disk full"):
        await tool.handler({}, ctx)
    text = await tool.handler({}, ctx)
    assert text.startswith("x" * 1_000) and "4,000 more characters cut" in text


def test_the_spec_names_the_server_and_keeps_the_schema() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    long = "Searches notes. " + "word " * 400

    async def call(name: str, args: dict[str, Any]) -> mcp_types.CallToolResult:
        raise AssertionError("not called")

    tool = mcp_tool(
        "notes",
        McpServerConfig(command="x"),
        _tool(name="search", description=long, input_schema=schema),
        call,
    )
    assert tool.spec.name == "notes__search" and tool.deferrable
    assert tool.spec.parameters == schema
    assert tool.spec.description.startswith("[notes] Searches notes.")
    assert len(tool.spec.description) <= MAX_DESCRIPTION_CHARS + len("[notes] ")
    bare = mcp_tool("n", McpServerConfig(command="x"), _tool(name="ping", input_schema={}), call)
    assert bare.spec.parameters == {"type": "object", "properties": {}}
    assert bare.spec.description == "[n] ping"
