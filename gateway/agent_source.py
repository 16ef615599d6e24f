"""What the runner needs from a started runtime: its config, store, and agents by session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from state import MemoryStore, SessionStore

if TYPE_CHECKING:
    from agent.agent import AIAgent
    from agent.config import HermesConfig

__all__ = ["AgentSource"]


class AgentSource(Protocol):
    """What the runner needs from a started runtime (`cli.runtime.Runtime` provides it)."""

    config: HermesConfig
    store: SessionStore
    context_length: int
    memory: MemoryStore | None  # what Hermes remembers about people; None: memory is off

    async def open_agent(self, session_id: str) -> AIAgent: ...

    async def release_agent(self, agent: AIAgent) -> None:
        """The runner dropped `agent` from memory: free what the runtime holds for it."""
        ...
