"""The tool registry: JSON-schema tools the model may call, and the one way to run a call.

A registry is explicit state: `run_agent.py` (or a test) builds one and registers tools in it.
Running a call never raises for the model's mistakes (bad JSON, unknown tool, a tool's own
`ToolError`, a timeout): the result text tells the model what went wrong, so the turn goes on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from agent.errors import ToolError
from agent.messages import ToolCall
from agent.providers.base import ToolSpec

__all__ = ["Approver", "Tool", "ToolContext", "ToolHandler", "ToolRegistry"]

log = structlog.get_logger(__name__)

Approver = Callable[[str], Awaitable[bool]]
"""Asks a person whether a dangerous action may run; None where nobody can answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a tool may know about the turn it runs in."""

    session_id: str
    cwd: Path = field(default_factory=Path.cwd)
    approver: Approver | None = None
    approval_policy: str = "ask"
    """ask | deny | allow, from `tools.approval`."""
    timeout_s: float = 60.0
    max_output_chars: int = 20_000
    services: dict[str, Any] = field(default_factory=dict)
    """Shared objects a tool needs, by name (e.g. "store" for session_search)."""


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    spec: ToolSpec
    handler: ToolHandler


class ToolRegistry:
    """Tools by name. Filled by explicit `register()` calls; importing it registers nothing."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.spec.name in self._tools:
            raise ValueError(f"tool {tool.spec.name!r} is already registered")
        self._tools[tool.spec.name] = tool

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self._tools.values())

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry with only the named tools (unknown names are ignored)."""
        return ToolRegistry(self._tools[n] for n in names if n in self._tools)

    async def run(self, call: ToolCall, ctx: ToolContext) -> str:
        """Run one call and return the text that goes back to the model as its result."""
        name = call["function"]["name"]
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return f"Error: unknown tool {name!r}. Available tools: {known}."
        try:
            args = json.loads(call["function"].get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            return f"Error: the arguments for {name} are not valid JSON ({exc.msg}); send a JSON object."
        if not isinstance(args, dict):
            return f"Error: the arguments for {name} must be a JSON object."
        try:
            async with asyncio.timeout(ctx.timeout_s):
                return await tool.handler(args, ctx)
        except ToolError as exc:
            return f"Error: {exc}"
        except TimeoutError:
            return f"Error: {name} did not finish within {ctx.timeout_s:g} s."
        except Exception as exc:  # a tool root: log and hand the failure to the model
            log.warning("tool_failed", tool=name, error_type=type(exc).__name__)
            return f"Error: {name} failed: {type(exc).__name__}: {exc}"
