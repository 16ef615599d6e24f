"""A real MCP server built with the official SDK's `MCPServer`, run as a subprocess by the tests.

`python -m tests.fakes.mcp_server [--http PORT] [--many N]`: stdio by default, streamable HTTP
on 127.0.0.1:PORT with `--http`. Tools: `shout` (text), `add` (structured output with a
schema), `fail` (an error result), `hang` (never answers), `pid` (the process id, so a test can
kill it mid-session), `echo`, `getenv`, `touch` (creates a file: an effect to look for), `whoami` (the Authorization header an HTTP client sent), and with
`--many N` N more `widget_NN` tools (the deferred-loading tests).

Contract (MCP specification 2025-06-18, "Tools"): `tools/list` returns name, description and
inputSchema (and outputSchema when declared); `tools/call` returns `content` blocks,
`structuredContent` for a declared output schema, and `isError: true` for a tool's own failure.
"""

from __future__ import annotations

import argparse
import os

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

WIDGET_TOPICS = (
    "calendar",
    "email",
    "notes",
    "weather",
    "lights",
    "music",
    "photos",
    "contacts",
    "maps",
    "files",
)


class Sum(BaseModel):
    total: int
    """a + b"""


def build(many: int = 0) -> MCPServer:
    app = MCPServer("hermes-test")

    @app.tool()
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    @app.tool()
    def add(a: int, b: int) -> Sum:
        """Add two integers; structured result."""
        return Sum(total=a + b)

    @app.tool()
    def fail(why: str) -> str:
        """Always fails, saying why."""
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError(f"failed on purpose: {why}")

    @app.tool()
    async def hang() -> str:
        """Never answers."""
        await anyio.sleep(3600)
        return "never"

    @app.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @app.tool()
    def touch(path: str) -> str:
        """Create an empty file at path (an effect a test can look for)."""
        with open(path, "a", encoding="utf-8"):
            pass
        return f"touched {path}"

    @app.tool()
    def getenv(name: str) -> str:
        """The value of one environment variable, bare."""
        return os.environ.get(name, "")

    @app.tool()
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    @app.tool()
    def whoami(ctx: Context) -> str:
        """The Authorization header of the HTTP request (empty over stdio)."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        return str(headers.get("authorization", "")) if headers is not None else ""

    for i in range(many):
        _add_widget(app, i)
    return app


def _add_widget(app: MCPServer, i: int) -> None:
    topic = WIDGET_TOPICS[i % len(WIDGET_TOPICS)]

    def widget(item: str, count: int = 1) -> str:
        return f"widget_{i:02d} did {count} x {item}"

    app.add_tool(
        widget,
        name=f"widget_{i:02d}",
        description=f"Manage {topic} item {i:02d}: list, create, update or delete {topic} "
        f"entries for the user's {topic} account, with paging and filters.",
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--many", type=int, default=0)
    args = parser.parse_args()
    app = build(args.many)
    if args.http is None:
        app.run()
    else:
        app.run(transport="streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
