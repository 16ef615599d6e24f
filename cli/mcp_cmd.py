"""`hermes mcp list` and `hermes mcp test NAME`: the configured MCP servers, started for a look.

`list` starts every enabled server (as the chat and the gateway would), prints one line per
server (transport, state, tool count or why it failed) and its tools, then stops them. `test`
starts one server, lists its tools with their context cost in bytes, and calls nothing: a tool
call could have effects.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import ConfigError

if TYPE_CHECKING:
    from agent.config import HermesConfig
    from agent.mcp import ServerStatus
    from agent.providers.base import ToolSpec

__all__ = ["add_mcp_parser", "run_mcp_command"]


def add_mcp_parser(sub: Any) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="list the configured MCP servers and their tools, or test one",
        description="MCP servers live under mcp.servers in config.yaml; see docs/tools.md.",
    )
    mcp_sub = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    mcp_sub.add_parser("list", help="start every enabled server, show its state and tools")
    test = mcp_sub.add_parser("test", help="start one server and show its tools and their cost")
    test.add_argument("name", help="the server's name under mcp.servers")


async def run_mcp_command(
    args: argparse.Namespace, config: HermesConfig, home: Path, environ: Mapping[str, str]
) -> int:
    from agent.mcp import McpHub

    if args.mcp_command == "test":
        return await _test(args.name, config, home, environ)
    if not config.mcp.servers:
        print("No MCP servers configured (mcp.servers in config.yaml; see docs/tools.md).")
        return 0
    async with await McpHub.start(config.mcp, environ, log_dir=home / "logs") as hub:
        statuses = {s.name: s for s in hub.statuses()}
        for name, server in config.mcp.servers.items():
            status = statuses.get(name)
            print(_status_line(name, server.transport, status))
            for tool in status.tools if status else ():
                print(f"    {name}__{tool}")
        failed = [s for s in statuses.values() if s.state != "connected"]
    return 1 if failed else 0


async def _test(name: str, config: HermesConfig, home: Path, environ: Mapping[str, str]) -> int:
    server = config.mcp.servers.get(name)
    if server is None:
        known = ", ".join(config.mcp.servers) or "none"
        raise ConfigError(f"no MCP server {name!r} in mcp.servers (configured: {known})")
    from agent.mcp import McpHub

    async with await McpHub.start(config.mcp, environ, log_dir=home / "logs", only=[name]) as hub:
        statuses = hub.statuses()
        if not statuses:
            print(f"{name}: disabled in config (enabled: false)")
            return 1
        status = statuses[0]
        print(_status_line(name, server.transport, status))
        if status.state != "connected":
            print(f"  its stderr is in {home / 'logs' / f'mcp-{name}.log'}")
            return 1
        tools = hub.current_tools()
        total = 0
        for tool in tools:
            size = spec_bytes(tool.spec)
            total += size
            print(f"  {tool.spec.name:<40} {size:>6,} B  {tool.spec.description[:60]}")
        print(f"  {len(tools)} tools, {total:,} bytes of schema if all were sent")
    return 0


def spec_bytes(spec: ToolSpec) -> int:
    """What a tool costs in a request: its OpenAI-style function entry, as compact JSON."""
    entry = {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }
    return len(json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode())


def _status_line(name: str, transport: str, status: ServerStatus | None) -> str:
    if status is None:
        return f"{name:<16} {transport:<6} disabled"
    if status.state == "connected":
        return f"{name:<16} {transport:<6} connected, {len(status.tools)} tools"
    return f"{name:<16} {transport:<6} {status.state}: {status.error}"
