"""The tool registry: JSON-schema tools the model may call, and the one way to run a call.

A registry is explicit state: `run_agent.py` (or a test) builds one and registers tools in it.
Running a call never raises for the model's mistakes (bad JSON, unknown tool, a tool's own
`ToolError`, a timeout): the result text tells the model what went wrong, so the turn goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from agent.access import ApprovalAnswer, ApprovalRequest, Approver, Principal
from agent.errors import ToolError
from agent.messages import ToolCall
from agent.providers.base import ToolSpec
from agent.tools.approval import PolicyMode
from agent.tools.sandbox import TerminalSettings
from agent.tools.workspace import Workspace

__all__ = ["Approver", "Tool", "ToolContext", "ToolHandler", "ToolRegistry"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a tool may know about the turn it runs in."""

    session_id: str
    cwd: Path = field(default_factory=Path.cwd)
    principal: Principal | None = None
    """Who the turn runs for; None only when code calls the registry directly (tests)."""
    approver: Approver | None = None
    """Asks a person where they are; None where nobody can answer."""
    approval_policy: PolicyMode = "ask"
    """ask | deny | allow, from `tools.approval`."""
    workspace: Workspace | None = None
    """Where file tools may write; None: `cwd` (for direct use in tests and scripts)."""
    terminal: TerminalSettings = field(default_factory=TerminalSettings)
    timeout_s: float = 60.0
    max_output_chars: int = 20_000
    services: dict[str, Any] = field(default_factory=dict)
    """Shared objects a tool needs, by name (e.g. "store" for session_search)."""

    @property
    def can_ask(self) -> bool:
        """Someone can answer an approval for this turn."""
        allowed = self.principal is None or self.principal.can_approve
        return self.approver is not None and allowed

    def the_workspace(self) -> Workspace:
        if self.workspace is not None:
            return self.workspace
        return Workspace(root=Path(os.path.realpath(self.cwd)), home=Path.home().resolve())

    async def approve(self, request: ApprovalRequest) -> bool:
        """Ask (only call when `can_ask`); True for "once" and "session"."""
        assert self.approver is not None
        return await self.approver(request) != "deny"


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

    def specs(self, principal: Principal | None = None) -> tuple[ToolSpec, ...]:
        """The tools offered to the model: all, or those `principal` may use."""
        return tuple(
            t.spec
            for t in self._tools.values()
            if principal is None or principal.may_use(t.spec.name)
        )

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry with only the named tools (unknown names are ignored)."""
        return ToolRegistry(self._tools[n] for n in names if n in self._tools)

    def extended(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A new registry with these tools added (ValueError when a name is taken)."""
        return ToolRegistry([*self._tools.values(), *tools])

    async def run(self, call: ToolCall, ctx: ToolContext) -> str:
        """Run one call and return the text that goes back to the model as its result."""
        name = call["function"]["name"]
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return f"Error: unknown tool {name!r}. Available tools: {known}."
        principal = ctx.principal
        if principal is not None and not principal.may_use(name):
            # The one place capabilities are checked: the model was not offered this tool.
            log.warning("tool_not_granted", tool=name, principal=principal.describe())
            return (
                f"Error: the tool {name!r} is not available to {principal.describe()}; "
                "do not call it again."
            )
        try:
            args = json.loads(call["function"].get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            return f"Error: the arguments for {name} are not valid JSON ({exc.msg}); send a JSON object."
        if not isinstance(args, dict):
            return f"Error: the arguments for {name} must be a JSON object."
        try:
            async with asyncio.timeout(ctx.timeout_s) as deadline:
                if ctx.approver is not None:  # a person deciding does not use up the deadline
                    ctx = replace(ctx, approver=_pausing(ctx.approver, deadline, ctx.timeout_s))
                return await tool.handler(args, ctx)
        except ToolError as exc:
            return f"Error: {exc}"
        except TimeoutError:
            return f"Error: {name} did not finish within {ctx.timeout_s:g} s."
        except Exception as exc:  # a tool root: log and hand the failure to the model
            log.warning("tool_failed", tool=name, error_type=type(exc).__name__)
            return f"Error: {name} failed: {type(exc).__name__}: {exc}"


def _pausing(approver: Approver, deadline: asyncio.Timeout, timeout_s: float) -> Approver:
    """`approver` with the tool's deadline suspended while it waits, and restarted after."""

    async def ask(request: ApprovalRequest) -> ApprovalAnswer:
        deadline.reschedule(None)
        try:
            return await approver(request)
        finally:
            deadline.reschedule(asyncio.get_running_loop().time() + timeout_s)

    return ask
