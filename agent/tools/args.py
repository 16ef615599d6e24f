"""Reading a tool call: model-given numbers clamped, the session store looked up; shared by tools.

The model writes tool arguments, so they are untrusted: a number may be a string, a bool, huge
or negative. Tools read them through here instead of each writing its own clamp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from agent.errors import ToolError
from agent.tools.registry import ToolContext
from state.contract import SessionStore, SessionView
from state.values import ReadScope

__all__ = ["int_arg", "scoped_services", "store_of"]


def int_arg(value: Any, *, default: int, low: int, high: int) -> int:
    """A model-given integer clamped to [low, high]; anything not a number means `default`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return max(low, min(int(value), high))


def store_of(ctx: ToolContext, tool: str) -> SessionView:
    """The sessions a tool may read (`ctx.services["store"]`) as a view bound to the turn's
    read scope, never the raw store; ToolError when there is none."""
    store: SessionView | SessionStore | None = ctx.services.get("store")
    if store is None:
        raise ToolError(f"{tool} is unavailable: no session store in this run")
    if _is_store(store):
        return cast(SessionStore, store).view(ctx.read_scope())
    return cast(SessionView, store)


def scoped_services(services: Mapping[str, Any], scope: ReadScope) -> dict[str, Any]:
    """`services` for one turn: the store replaced by a view bound to `scope`."""
    store = services.get("store")
    if store is None or not _is_store(store):
        return dict(services)
    return {**services, "store": cast(SessionStore, store).view(scope)}


def _is_store(candidate: object) -> bool:
    """A whole store (it makes views), not a view of one."""
    return callable(getattr(candidate, "view", None))
