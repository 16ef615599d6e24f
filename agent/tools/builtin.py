"""The built-in tools every agent gets: terminal, read_file and write_file.

`session_search` is not here: it needs the session store and comes from
`agent.tools.session_search`. Nothing registers itself; the caller adds these to a registry.
"""

from __future__ import annotations

from agent.tools.files import read_file_tool, write_file_tool
from agent.tools.registry import Tool
from agent.tools.terminal import terminal_tool

__all__ = ["builtin_tools"]


def builtin_tools() -> list[Tool]:
    """Fresh `Tool` values for terminal, read_file and write_file, in that order."""
    return [terminal_tool(), read_file_tool(), write_file_tool()]
