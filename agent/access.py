"""Who a turn runs for, what they may do, and who can answer for them: principals and approvals.

A principal is a person behind one front door: the operator at the terminal, an HTTP API key, an
allowed Telegram or Discord user. The gateway resolves it in one place
(`gateway.principals.resolve_principal`); the tool registry checks it in one place
(`ToolRegistry.run`), and commands read `admin` from it. Nothing else decides who may do what.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from state.values import ReadScope

__all__ = [
    "MCP_GRANT_PREFIX",
    "MCP_SEPARATOR",
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "Principal",
    "TurnAccess",
    "mcp_server_of_grant",
    "mcp_tool_name",
]

MCP_SEPARATOR = "__"
"""Between an MCP server's name and its tool's: `files__read_text`."""
MCP_GRANT_PREFIX = "mcp:"
"""A grant of every tool of one MCP server: `mcp:files`."""

ApprovalAnswer: TypeAlias = Literal["once", "session", "deny"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """One question for a person."""

    kind: Literal["command", "read", "write", "tool"]
    subject: str
    """The command exactly as it will run, the absolute path, or the tool call (name and
    arguments)."""
    reason: str
    """Why it needs a person, in a few words."""


Approver: TypeAlias = Callable[[ApprovalRequest], Awaitable[ApprovalAnswer]]
"""Asks a person where they are (terminal prompt, Telegram keyboard, Discord buttons)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """One caller and their capabilities."""

    platform: str
    """Where they talk from: terminal, telegram, discord, http."""
    id: str
    """Their id there (a user id, an HTTP key's name, the local user name)."""
    name: str | None = None
    admin: bool = False
    """May change the model and other runtime-wide settings."""
    tools: frozenset[str] = frozenset()
    """The tools they may call; the model is offered only these."""
    can_approve: bool = False
    """Someone can answer an approval where they are (a TTY, an admin of their chat)."""

    @classmethod
    def operator(cls, tools: Iterable[str], *, can_approve: bool) -> Principal:
        """The person running Hermes on this machine: every tool, admin."""
        return cls(
            platform="terminal",
            id="local",
            admin=True,
            tools=frozenset(tools),
            can_approve=can_approve,
        )

    @property
    def owner(self) -> str:
        """The owner key stored on what this principal makes (sessions, memory, jobs, media):
        `terminal:local`, `http:alice`, `telegram:111`. One person behind one front door."""
        return f"{self.platform}:{self.id}"

    def may_use(self, tool: str) -> bool:
        """Granted by name, or (an MCP tool) by a grant of its whole server (`mcp:files`)."""
        if tool in self.tools:
            return True
        server = mcp_server_of_grant(tool)
        return server is not None and f"{MCP_GRANT_PREFIX}{server}" in self.tools

    def describe(self) -> str:
        """`telegram user 42` / `http key default`: for refusals and logs (no secrets)."""
        kind = "key" if self.platform == "http" else "user"
        return f"{self.platform} {kind} {self.id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAccess:
    """What one turn may do: its principal, and who can answer an approval during it."""

    principal: Principal
    approver: Approver | None = None
    """Asks a person where the principal is; None where nobody can approve."""
    scope: ReadScope | None = None
    """Whose sessions the turn acts for and may read (a group chat's, or widened for an
    admin by config); None: the principal's own (`Principal.owner`)."""

    @property
    def reads(self) -> ReadScope:
        """The turn's read scope: `scope`, else the principal's own sessions only."""
        return self.scope if self.scope is not None else ReadScope(owner=self.principal.owner)


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model sees for `tool` of MCP server `server`: `server__tool`."""
    return f"{server}{MCP_SEPARATOR}{tool}"


def mcp_server_of_grant(name: str) -> str | None:
    """The MCP server a grant or tool name refers to (`mcp:files`, `files__read`), else None."""
    if name.startswith(MCP_GRANT_PREFIX):
        return name.removeprefix(MCP_GRANT_PREFIX) or None
    server, sep, tool = name.partition(MCP_SEPARATOR)
    return server if sep and server and tool else None
