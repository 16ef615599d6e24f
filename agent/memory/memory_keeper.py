"""The memory half of one session's agent: whose memory it uses, and the two moments the
system message may carry it (session start, compaction), the tool's view, the profile offers.

`AIAgent` holds a `MemoryKeeper`, which reaches the agent only through `MemoryHost`. Whose
memory a session uses is bound by the gateway (`bind`: a person in a conversation only they
read) and kept in the session's meta, so a compaction outside a turn (`/compress`, the CLI)
knows it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from agent.access import Principal
from agent.config import MemoryConfig
from agent.errors import ConcurrentModification
from agent.ledger.session import LedgerChange
from agent.memory.session_memory import (
    SessionMemory,
    is_session_start,
    renewed_at_compaction,
    session_memory,
)
from agent.memory.view import MemoryBackend
from agent.messages import ChatMessage
from agent.session_meta import read_meta, write_memory_owner
from state.contract import AgentStore, CompactionKind

if TYPE_CHECKING:
    from agent.context_engine import CompressResult

__all__ = ["MemoryHost", "MemoryKeeper"]


class MemoryHost(Protocol):
    """What the memory keeper needs of the session's agent (`AIAgent` provides it)."""

    @property
    def session_id(self) -> str: ...

    @property
    def store(self) -> AgentStore: ...

    @property
    def transcript(self) -> list[ChatMessage]: ...

    @property
    def known_version(self) -> int | None: ...

    async def persist(self) -> None: ...

    async def commit_compaction(
        self,
        messages: list[ChatMessage],
        *,
        kind: CompactionKind | None,
        expected_version: int | None,
    ) -> None: ...


class MemoryKeeper:
    """One agent's use of its person's memory."""

    def __init__(
        self, host: MemoryHost, backend: MemoryBackend | None, config: MemoryConfig
    ) -> None:
        self._host = host
        self._backend = backend if config.enabled else None
        self._config = config
        self._memory: SessionMemory | None = None
        self._known = False
        """Whether the owner is known (bound, or read from the meta)."""

    @property
    def owner(self) -> str | None:
        return self._memory.owner if self._memory is not None else None

    async def bind(self, owner: str | None) -> None:
        """Use `owner`'s memory (`Principal.owner`; None: nobody's, e.g. a group chat)."""
        if self._backend is None:
            return
        current = await self._current()
        if (current.owner if current is not None else None) == owner:
            return
        self._memory = session_memory(self._backend, self._config, owner)
        await write_memory_owner(self._host.store.meta, self._host.session_id, owner)

    async def open_session(self, new: list[ChatMessage]) -> None:
        """A session's first message: its person's profile and the notes matching `new` join
        the system message, before the first model call (no prompt cache to break yet)."""
        memory = await self._current()
        host = self._host
        if memory is None or not is_session_start(host.transcript):
            return
        updated = await memory.opening(host.transcript, new)
        if updated is host.transcript:
            return
        await host.persist()
        try:
            await host.commit_compaction(updated, kind=None, expected_version=host.known_version)
        except ConcurrentModification:  # another worker wrote meanwhile: the host reloaded
            return

    async def renewed(
        self, messages: list[ChatMessage], result: CompressResult | None
    ) -> list[ChatMessage]:
        """A compaction's new active set: the summary's facts about the user kept first, then
        the memory block renewed (the prompt cache breaks here anyway)."""
        memory = await self._current()
        return await renewed_at_compaction(memory, messages, result, self._host.session_id)

    async def offer(self, change: LedgerChange) -> None:
        """Standing instructions the ledger just took that are about the person."""
        memory = await self._current()
        if memory is not None and change.added:
            await memory.offer_instructions(change, session_id=self._host.session_id)

    def services(self, base: Mapping[str, Any], principal: Principal) -> dict[str, Any]:
        """A turn's tool services: the `memory` tool's view only for the session's own person."""
        services = dict(base)
        if self._memory is not None and self._memory.owner == principal.owner:
            services["memory"] = self._memory.view
        return services

    async def _current(self) -> SessionMemory | None:
        if not self._known and self._backend is not None:
            meta = await read_meta(self._host.store.meta, self._host.session_id)
            self._memory = session_memory(self._backend, self._config, meta.memory_owner)
            self._known = True
        return self._memory
