"""Reading a tool call: model-given numbers clamped, the session store looked up; shared by tools.

The model writes tool arguments, so they are untrusted: a number may be a string, a bool, huge
or negative. Tools read them through here instead of each writing its own clamp.
"""

from __future__ import annotations

from typing import Any

from agent.errors import ToolError
from agent.tools.registry import ToolContext
from state.contract import SessionStore

__all__ = ["int_arg", "store_of"]


def int_arg(value: Any, *, default: int, low: int, high: int) -> int:
    """A model-given integer clamped to [low, high]; anything not a number means `default`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return max(low, min(int(value), high))


def store_of(ctx: ToolContext, tool: str) -> SessionStore:
    """The session store a tool works on (`ctx.services["store"]`); ToolError when there is none."""
    store: SessionStore | None = ctx.services.get("store")
    if store is None:
        raise ToolError(f"{tool} is unavailable: no session store in this run")
    return store
