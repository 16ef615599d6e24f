"""One step of a turn's tool calls: run them side by side, under the turn's access, redacted."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from agent.access import TurnAccess
from agent.memory.memory_keeper import MemoryKeeper
from agent.messages import ChatMessage, ToolCall, tool_message
from agent.redaction import redact_text
from agent.tools.approval import SessionApprovals, remembering
from agent.tools.args import scoped_services
from agent.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agent.deps import AgentDeps

__all__ = ["ToolHost", "run_tool_calls"]


class ToolHost(Protocol):
    """What running a turn's tools reads of the session's agent (`AIAgent` provides it)."""

    @property
    def session_id(self) -> str: ...

    @property
    def tools(self) -> ToolRegistry:
        """The runtime's tools plus the session's engine's own."""
        ...

    @property
    def deps(self) -> AgentDeps: ...

    @property
    def memory(self) -> MemoryKeeper: ...

    @property
    def approvals(self) -> SessionApprovals:
        """Requests answered "Always for this session"."""
        ...


async def run_tool_calls(
    host: ToolHost, calls: tuple[ToolCall, ...], access: TurnAccess
) -> list[ChatMessage]:
    """The calls' results as tool messages, in the calls' order. The tools see the session's
    context scoped to what `access` may read (never the raw store; memory: the person's own),
    and approvals answered "Always for this session" are remembered for the session."""
    approver = access.approver if access.principal.can_approve else None
    base = host.deps.tool_context
    ctx = replace(
        base,
        session_id=host.session_id,
        principal=access.principal,
        scope=access.reads,
        services=host.memory.services(
            scoped_services(base.services, access.reads), access.principal
        ),
        approver=remembering(approver, host.approvals) if approver is not None else None,
    )
    texts = await asyncio.gather(*(host.tools.run(call, ctx) for call in calls))
    # A command can print a key it found: it never reaches the model or the store.
    return [
        tool_message(call["id"], call["function"]["name"], redact_text(text))
        for call, text in zip(calls, texts, strict=True)
    ]
