"""The standing-instructions half of `AIAgent`: `/pin`, `/unpin`, instructions noticed in the
user's words, and the ledger block of the system message (kept across compactions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from agent.errors import ConcurrentModification, StoreError
from agent.ledger.rules import apply_ledger
from agent.ledger.session import LedgerChange, SessionLedger
from agent.messages import ChatMessage
from state.values import Instruction

if TYPE_CHECKING:
    from agent.deps import AgentDeps
    from state.values import SessionInfo

__all__ = ["KeepsLedger"]

log = structlog.get_logger(__name__)


class KeepsLedger:
    """Inherited by `AIAgent`, which provides the attributes and hooks below."""

    session_id: str
    transcript: list[ChatMessage]
    deps: AgentDeps
    known_version: int | None
    _ledger: SessionLedger | None

    async def wait_background(self) -> None:
        raise NotImplementedError

    async def _persist(self) -> None:
        raise NotImplementedError

    async def _reload(self, info: SessionInfo | None) -> None:
        raise NotImplementedError

    def _count_own_write(self) -> None:
        raise NotImplementedError

    async def ledger(self) -> SessionLedger:
        """This session's standing-instructions ledger (read from the store on first use)."""
        if self._ledger is None or self._ledger.session_id != self.session_id:
            self._ledger = await SessionLedger.load(self.deps.store, self.session_id)
        return self._ledger

    async def pin(self, text: str) -> LedgerChange:
        """`/pin TEXT`: a standing instruction, shown in the system message from now on."""
        await self.wait_background()
        change = await (await self.ledger()).pin(text)
        if change.added:
            await self._show_ledger()
        return change

    async def unpin(self, number: int) -> Instruction | None:
        """`/unpin N`: retire the N-th standing instruction; None when there is no such entry."""
        await self.wait_background()
        removed = await (await self.ledger()).remove(number)
        if removed is not None:
            await self._show_ledger()
        return removed

    async def _note_instructions(self, message: ChatMessage) -> None:
        """Keep the user's standing instructions; a replaced one leaves the system message now."""
        try:
            change = await (await self.ledger()).observe(message)
            if change.superseded:
                await self._show_ledger()
        except StoreError as exc:  # the ledger is bookkeeping: the turn goes on without it
            log.warning(
                "ledger_update_failed", session_id=self.session_id, error_type=type(exc).__name__
            )

    async def _show_ledger(self) -> None:
        """Rewrite the system message's ledger block now: one sanctioned prompt-cache break,
        for an explicit `/pin`, `/unpin` or a replaced instruction."""
        updated = apply_ledger(self.transcript, (await self.ledger()).entries)
        if updated is self.transcript:
            return
        await self._persist()
        try:
            await self.deps.store.archive_and_compact(
                self.session_id, updated, expected_version=self.known_version
            )
        except ConcurrentModification:  # another worker wrote meanwhile: start from its state
            await self._reload(None)
            return
        self.transcript = updated
        self._count_own_write()

    async def _with_ledger(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """A compacted transcript with the current ledger in its system message (never
        summarized: the head is not part of what a summary replaces)."""
        try:
            entries = (await self.ledger()).entries
        except StoreError as exc:
            log.warning(
                "ledger_unavailable", session_id=self.session_id, error_type=type(exc).__name__
            )
            return messages
        return apply_ledger(messages, entries)
