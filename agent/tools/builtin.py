"""The built-in tools: terminal, read_file, write_file, and the opt-in web tools.

`session_search` is not here: it needs the session store and comes from
`agent.tools.session_search`. Nothing registers itself; the caller adds these to a registry.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.config_tools import WebConfig
from agent.tools.files import read_file_tool, write_file_tool
from agent.tools.registry import Tool
from agent.tools.terminal import terminal_tool

__all__ = ["builtin_tools", "web_tools"]


def builtin_tools() -> list[Tool]:
    """Fresh `Tool` values for terminal, read_file and write_file, in that order."""
    return [terminal_tool(), read_file_tool(), write_file_tool()]


def web_tools(config: WebConfig, environ: Mapping[str, str]) -> list[Tool]:
    """web_fetch and web_search (offered only where `tools.enabled` names them)."""
    from agent.tools.web_fetch import web_fetch_tool
    from agent.tools.web_search import search_backend, web_search_tool

    backend = search_backend(config.search, environ)
    return [web_fetch_tool(config.fetch), web_search_tool(backend, config.search)]
