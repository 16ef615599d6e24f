"""MCP client: configured servers kept connected through the official SDK, their tools as ours.

Importing this package loads no part of the `mcp` SDK; connecting does.
"""

from __future__ import annotations

from agent.mcp.connection import McpConnection, ServerState, ServerStatus
from agent.mcp.hub import McpHub

__all__ = ["McpConnection", "McpHub", "ServerState", "ServerStatus"]
