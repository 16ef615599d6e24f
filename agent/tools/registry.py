"""The tool registry: JSON-schema tools the model may call, and the one way to run a call.

A registry is explicit state: `run_agent.py` (or a test) builds one and registers tools in it.
Tools may also come from sources whose tools change while it runs (`ToolSource`: the MCP
servers that are connected right now). With `defer_after` set, many deferrable tools are offered
as an index and a `tool_search` step (`agent.tools.deferred`) that the registry answers itself.
Running a call never raises for the model's mistakes (bad JSON, unknown tool, a tool's own
`ToolError`, a timeout): the result text tells the model what went wrong, so the turn goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import structlog

from agent.access import ApprovalAnswer, ApprovalRequest, Approver, Principal
from agent.errors import ToolError
from agent.messages import ChatMessage, ToolCall
from agent.providers.base import ToolSpec
from agent.tools.approval import PolicyMode
from agent.tools.deferred import TOOL_SEARCH, find_tools, offered_specs, search_result
from agent.tools.progress import tool_finished, tool_started
from agent.tools.sandbox import TerminalSettings
from agent.tools.workspace import Workspace
from state.values import LOCAL_OWNER, ReadScope

__all__ = ["Approver", "Tool", "ToolContext", "ToolHandler", "ToolRegistry", "ToolSource"]

log = structlog.get_logger(__name__)

_LISTED = 30
"""An unknown tool's error names at most this many of the available ones."""


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
    """Shared objects a tool needs, by name (e.g. "store" for session_search: during a turn a
    `state.SessionView` bound to `scope`, never the raw store)."""
    scope: ReadScope | None = None
    """Whose sessions the turn may read; None: the principal's own (the machine owner's
    without a principal)."""

    def read_scope(self) -> ReadScope:
        """`scope`, else the principal's own sessions, else the machine owner's."""
        if self.scope is not None:
            return self.scope
        return ReadScope(owner=self.principal.owner if self.principal else LOCAL_OWNER)

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
    deferrable: bool = False
    """May be left out of requests behind the `tool_search` index (MCP tools)."""
    describe: Callable[[Principal | None], ToolSpec] | None = None
    """The spec as offered to one principal when it depends on them or on the time (the
    `schedule` tool names the current time in the user's zone); None: `spec` as is."""

    def spec_for(self, principal: Principal | None) -> ToolSpec:
        return self.spec if self.describe is None else self.describe(principal)


class ToolSource(Protocol):
    """Tools that come and go while the runtime runs (an MCP server's, while it is connected)."""

    def current_tools(self) -> Sequence[Tool]: ...


class ToolRegistry:
    """Tools by name. Filled by explicit `register()` calls; importing it registers nothing.
    A source's tool never shadows a registered one (it is skipped)."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        sources: Sequence[ToolSource] = (),
        defer_after: int | None = None,
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources = tuple(sources)
        self.defer_after = defer_after
        """More deferrable tools than this and the model gets the index; None: never."""
        for tool in tools:
            self.register(tool)

    def _all(self) -> dict[str, Tool]:
        if not self._sources:
            return self._tools
        tools = dict(self._tools)
        for source in self._sources:
            for tool in source.current_tools():
                tools.setdefault(tool.spec.name, tool)
        return tools

    def register(self, tool: Tool) -> None:
        if tool.spec.name in self._tools:
            raise ValueError(f"tool {tool.spec.name!r} is already registered")
        self._tools[tool.spec.name] = tool

    def names(self) -> list[str]:
        return list(self._all())

    def specs(self, principal: Principal | None = None) -> tuple[ToolSpec, ...]:
        """Every tool's schema: all, or those `principal` may use."""
        return tuple(
            t.spec_for(principal)
            for t in self._all().values()
            if principal is None or principal.may_use(t.spec.name)
        )

    def offered(
        self, principal: Principal | None, transcript: Sequence[ChatMessage]
    ) -> tuple[ToolSpec, ...]:
        """The schemas for the next request: `specs(principal)`, with the deferrable tools
        behind the `tool_search` index when there are more than `defer_after`."""
        tools = self._all()
        return offered_specs(
            self.specs(principal),
            transcript,
            is_deferrable=lambda name: name in tools and tools[name].deferrable,
            defer_after=self.defer_after,
        )

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry with only the named registered tools (unknown names are ignored); the
        sources stay (their tools are granted per principal)."""
        return ToolRegistry(
            (self._tools[n] for n in names if n in self._tools),
            sources=self._sources,
            defer_after=self.defer_after,
        )

    def extended(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A new registry with these tools added (ValueError when a name is taken)."""
        return ToolRegistry(
            [*self._tools.values(), *tools], sources=self._sources, defer_after=self.defer_after
        )

    async def run(self, call: ToolCall, ctx: ToolContext) -> str:
        """Run one call and return the text that goes back to the model as its result."""
        name = call["function"]["name"]
        tools = self._all()
        tool = tools.get(name)
        if tool is None and name == TOOL_SEARCH and self.defer_after is not None:
            return self._search(call, ctx.principal)
        if tool is None:
            names = sorted(self.names_for(ctx.principal))
            known = ", ".join(names[:_LISTED]) or "none"
            more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
            return f"Error: unknown tool {name!r}. Available tools: {known}{more}."
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
        tool_started(ctx, name, args)  # whoever watches (the terminal) sees it run
        result = await self._run_handler(tool, name, args, ctx)
        tool_finished(ctx, name, result)
        return result

    @staticmethod
    async def _run_handler(tool: Tool, name: str, args: dict[str, Any], ctx: ToolContext) -> str:
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

    def names_for(self, principal: Principal | None) -> list[str]:
        """The tools `principal` may call (all without one)."""
        return [s.name for s in self.specs(principal)]

    def _search(self, call: ToolCall, principal: Principal | None) -> str:
        """`tool_search`: load the deferrable tools the query names or matches, among those
        `principal` may use (the answer's first line is what `offered` reads back)."""
        try:
            args = json.loads(call["function"].get("arguments") or "{}")
        except json.JSONDecodeError:
            args = None
        query = args.get("query") if isinstance(args, dict) else None
        if not isinstance(query, str) or not query.strip():
            return 'Error: tool_search needs {"query": "names or words"}.'
        tools = self._all()
        deferred = [s for s in self.specs(principal) if tools[s.name].deferrable]
        return search_result(find_tools(query, deferred))


def _pausing(approver: Approver, deadline: asyncio.Timeout, timeout_s: float) -> Approver:
    """`approver` with the tool's deadline suspended while it waits, and restarted after."""

    async def ask(request: ApprovalRequest) -> ApprovalAnswer:
        deadline.reschedule(None)
        try:
            return await approver(request)
        finally:
            deadline.reschedule(asyncio.get_running_loop().time() + timeout_s)

    return ask
