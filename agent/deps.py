"""What every session's agent is given, and what one turn returns: plain values.

`AgentDeps` is shared by all agents of one runtime (built in `cli.runtime`); `TurnResult` is
what `AIAgent.run_turn` hands back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.background import EndOfTurnWork
from agent.compaction.micro_cadence import cache_ttl_seconds
from agent.events import EventSink
from agent.memory.view import MemoryBackend
from agent.messages import ToolCall
from agent.providers.base import Provider, Usage
from agent.server_slot import ServerSlot
from agent.tools.registry import ToolContext, ToolRegistry
from state.contract import AgentStore

if TYPE_CHECKING:
    from agent.config import HermesConfig
    from agent.context_engine import ContextEngine

__all__ = ["AgentDeps", "TurnResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDeps:
    """Everything a session's agent needs; shared by all agents of one runtime."""

    config: HermesConfig
    provider: Provider
    store: AgentStore
    """The roles the agent uses (`state.contract.AgentStore`), not the whole store."""
    engine_factory: Callable[[], ContextEngine]
    tools: ToolRegistry
    tool_context: ToolContext
    memory: MemoryBackend | None = None
    """What Hermes remembers about people (None: memory is off); sessions use it through a
    view bound to their person (`AIAgent.bind_memory`)."""
    cache_ttl: str | None = None
    """The prompt-cache TTL when caching applies to this route and model, else None."""
    cache_blocks_only: bool = False
    """The route speaks the OpenAI wire (OpenRouter): markers must sit on content blocks."""
    end_of_turn: tuple[EndOfTurnWork, ...] = ()
    """Background work after each reply, first wanted first (see `agent.background`)."""
    on_event: EventSink | None = None
    on_window_learned: Callable[[str, int], None] | None = None
    """Called with (model, window) when a provider's overflow error revealed a smaller window
    than assumed; the runtime remembers it for the endpoint, so the next start knows."""
    clock: Callable[[], float] = time.monotonic
    """When the last model call happened (prompt-cache warmth); replaceable for simulations."""
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    """How end-of-turn work waits for its moment; replaceable for simulations."""
    server_slot: ServerSlot = field(default_factory=ServerSlot)
    """The model server's capacity, shared by every session: on a single-slot server
    background work yields to user turns (`agent.server_slot`); default: no limit."""

    @property
    def cache_ttl_s(self) -> float | None:
        return cache_ttl_seconds(self.cache_ttl)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    reply: str
    session_id: str
    usage: Usage
    """Summed over every model call of the turn."""
    model_calls: int
    compacted: bool = False
    truncated: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    """Calls to the caller's own tools (`TurnOptions.client_tools`) the turn ended with; the
    caller runs them and continues the turn with their results."""
