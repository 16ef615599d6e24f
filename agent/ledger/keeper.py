"""The standing instructions of one session's agent: `/pin`, `/unpin`, instructions noticed in
the user's words, and the ledger block of the system message (kept across compactions).

`AIAgent` holds a `LedgerKeeper` (`agent.instructions`), which reaches the agent only through
`LedgerHost`.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from agent.errors import ConcurrentModification, StoreError
from agent.ledger.rules import apply_ledger
from agent.ledger.session import LedgerChange, SessionLedger
from agent.messages import ChatMessage
from state.contract import AgentStore, CompactionKind
from state.values import Instruction

__all__ = ["LedgerHost", "LedgerKeeper"]

log = structlog.get_logger(__name__)


class LedgerHost(Protocol):
    """What the ledger keeper needs of the session's agent (`AIAgent` provides it)."""

    @property
    def session_id(self) -> str: ...

    @property
    def store(self) -> AgentStore: ...

    @property
    def transcript(self) -> list[ChatMessage]: ...

    @property
    def known_version(self) -> int | None: ...

    async def wait_background(self) -> None:
        """Let end-of-turn work settle (it must not compact from a head about to change)."""
        ...

    async def persist(self) -> None:
        """Store what the transcript still owes the store."""
        ...

    async def commit_compaction(
        self,
        messages: list[ChatMessage],
        *,
        kind: CompactionKind | None,
        expected_version: int | None,
    ) -> None:
        """Make `messages` the active set; raises ConcurrentModification, having reloaded the
        stored set, when the session moved since `expected_version`."""
        ...


class LedgerKeeper:
    """One agent's standing-instructions ledger and the system message's block showing it."""

    def __init__(self, host: LedgerHost) -> None:
        self._host = host
        self._ledger: SessionLedger | None = None

    async def ledger(self) -> SessionLedger:
        """This session's standing-instructions ledger (read from the store on first use)."""
        session_id = self._host.session_id
        if self._ledger is None or self._ledger.session_id != session_id:
            self._ledger = await SessionLedger.load(self._host.store.ledger, session_id)
        return self._ledger

    async def pin(self, text: str) -> LedgerChange:
        """`/pin TEXT`: a standing instruction, shown in the system message from now on."""
        await self._host.wait_background()
        change = await (await self.ledger()).pin(text)
        if change.added:
            await self._show_ledger()
        return change

    async def unpin(self, number: int) -> Instruction | None:
        """`/unpin N`: retire the N-th standing instruction; None when there is no such entry."""
        await self._host.wait_background()
        removed = await (await self.ledger()).remove(number)
        if removed is not None:
            await self._show_ledger()
        return removed

    async def note(self, message: ChatMessage) -> LedgerChange:
        """Keep the user's standing instructions; a replaced one leaves the system message now.
        Returns what changed (nothing when the store failed)."""
        try:
            change = await (await self.ledger()).observe(message)
            if change.superseded:
                await self._show_ledger()
        except StoreError as exc:  # the ledger is bookkeeping: the turn goes on without it
            log.warning(
                "ledger_update_failed",
                session_id=self._host.session_id,
                error_type=type(exc).__name__,
            )
            return LedgerChange()
        return change

    async def with_ledger(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """A compacted transcript with the current ledger in its system message (never
        summarized: the head is not part of what a summary replaces)."""
        try:
            entries = (await self.ledger()).entries
        except StoreError as exc:
            log.warning(
                "ledger_unavailable",
                session_id=self._host.session_id,
                error_type=type(exc).__name__,
            )
            return messages
        return apply_ledger(messages, entries)

    async def _show_ledger(self) -> None:
        """Rewrite the system message's ledger block now: one sanctioned prompt-cache break,
        for an explicit `/pin`, `/unpin` or a replaced instruction."""
        host = self._host
        updated = apply_ledger(host.transcript, (await self.ledger()).entries)
        if updated is host.transcript:
            return
        await host.persist()
        try:
            await host.commit_compaction(updated, kind=None, expected_version=host.known_version)
        except ConcurrentModification:  # another worker wrote meanwhile: the host reloaded
            return
