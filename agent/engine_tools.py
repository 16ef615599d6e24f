"""The active context engine's own tools for one session: beside the runtime's, for its callers.

An engine may offer tools (`ContextEngine.tools()`, e.g. `lcm_grep`). The agent builds one
registry per session from the runtime's tools plus the engine's (an engine may not shadow a
runtime tool), and whoever may talk to the session may call them: they read that session's own
context, as `recall` does, and they come with the engine the operator chose.
"""

from __future__ import annotations

from dataclasses import replace

from agent.access import TurnAccess
from agent.context_engine import ContextEngine
from agent.errors import ConfigError
from agent.tools.registry import ToolRegistry

__all__ = ["grant_engine_tools", "session_tools"]


def session_tools(shared: ToolRegistry, engine: ContextEngine) -> ToolRegistry:
    """The runtime's tools with the engine's added; ConfigError when one shadows a runtime tool."""
    own = engine.tools()
    if not own:
        return shared
    try:
        return shared.extended(own)
    except ValueError as exc:
        raise ConfigError(
            f"context engine {engine.name!r} offers a tool whose name is taken: {exc}",
            key="context.engine",
        ) from exc


def grant_engine_tools(
    access: TurnAccess, session: ToolRegistry, shared: ToolRegistry
) -> TurnAccess:
    """`access` with the engine's tools (those in `session` but not in `shared`) granted."""
    own = frozenset(session.names()) - frozenset(shared.names())
    if not own or own <= access.principal.tools:
        return access
    principal = replace(access.principal, tools=access.principal.tools | own)
    return replace(access, principal=principal)
