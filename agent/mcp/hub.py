"""The configured MCP servers of one runtime, and their tools as a `ToolSource`.

`McpHub.start` starts every enabled server at once and waits (at most each server's
`connect_timeout_s`) for the first attempts, so the first turn sees the servers that came up; the
rest keep retrying in the background. `current_tools()` is what the registry asks each time it
builds a request: only connected servers' tools, so a server that died is simply absent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

from agent.config_tools import McpConfig
from agent.mcp.adapter import mcp_tool
from agent.mcp.connection import BACKOFF_START_S, McpConnection, ServerStatus
from agent.tools.registry import Tool

__all__ = ["McpHub"]


class McpHub:
    """Holds one `McpConnection` per enabled server; satisfies `ToolSource`."""

    def __init__(self, connections: Sequence[McpConnection]) -> None:
        self._connections = tuple(connections)
        self._built: dict[str, tuple[int, tuple[Tool, ...]]] = {}

    @classmethod
    async def start(
        cls,
        config: McpConfig,
        environ: Mapping[str, str],
        *,
        log_dir: Path | None = None,
        only: Sequence[str] | None = None,
        backoff_start_s: float = BACKOFF_START_S,
    ) -> McpHub:
        """Start the enabled servers (or just `only`) and wait for their first attempts."""
        names = [n for n in config.enabled_servers() if only is None or n in only]
        hub = cls(
            [
                McpConnection(
                    name,
                    config.servers[name],
                    environ=environ,
                    log_dir=log_dir,
                    backoff_start_s=backoff_start_s,
                )
                for name in names
            ]
        )
        for connection in hub._connections:
            connection.start()
        await asyncio.gather(
            *(c.wait_settled(c.config.connect_timeout_s + 1) for c in hub._connections)
        )
        return hub

    def connection(self, name: str) -> McpConnection | None:
        return next((c for c in self._connections if c.name == name), None)

    def statuses(self) -> list[ServerStatus]:
        return [c.status() for c in self._connections]

    def current_tools(self) -> list[Tool]:
        """The tools of the servers connected right now, as ours (built once per connection)."""
        tools: list[Tool] = []
        for c in self._connections:
            listed = c.tools
            if not listed:
                continue
            built = self._built.get(c.name)
            if built is None or built[0] != c.generation:
                made = tuple(mcp_tool(c.name, c.config, t, c.call) for t in listed)
                built = self._built[c.name] = (c.generation, made)
            tools.extend(built[1])
        return tools

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._connections))

    async def __aenter__(self) -> McpHub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
