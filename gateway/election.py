"""Platforms that must run on one worker only: Telegram long polling and the Discord gateway.

`ElectedAdapter` wraps such an adapter. Every worker starts it; only the worker holding the
store's leadership for the platform (`SessionLocks.lead`) connects. When the leader dies (its
PostgreSQL advisory lock dies with its connection; a SQLite lease expires) another worker's
wait ends and it connects, within seconds. A leader that learns it lost the lock disconnects
at once, so two pollers never run for long (Telegram would answer one of them with 409).
The other workers keep serving HTTP and Telegram webhooks; this adapter only says it cannot
send (or ask for an approval), which never happens in practice: a chat's messages, and presses
of its buttons, reach the worker that polls them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.errors import PlatformError
from gateway.platforms.base import (
    ApprovalChannel,
    ChatRef,
    Deliver,
    PlatformAdapter,
    PlatformName,
)
from state import Lease
from state.contract import SessionLocks

__all__ = ["RETRY_S", "ElectedAdapter"]

log = structlog.get_logger(__name__)

RETRY_S = 1.0
"""After a failed term (the store or the platform was unreachable), campaign again this late."""


class ElectedAdapter:
    """An adapter that connects only while this worker leads its platform."""

    def __init__(
        self,
        factory: Callable[[], PlatformAdapter],
        *,
        locks: SessionLocks,
        retry_s: float = RETRY_S,
    ) -> None:
        self._factory = factory
        self._inner = factory()
        self.name: PlatformName = self._inner.name
        self.max_message_chars = self._inner.max_message_chars
        self.min_edit_interval_s = self._inner.min_edit_interval_s
        self._locks = locks
        self._retry_s = retry_s
        self._deliver: Deliver | None = None
        self._campaign_task: asyncio.Task[None] | None = None
        self.is_leader = False
        """This worker runs the platform's connection now (from its start to its full stop)."""
        self._changed = asyncio.Condition()
        self.terms = 0
        """How many times this worker became the platform's leader."""

    async def start(self, deliver: Deliver) -> None:
        """Begin campaigning in the background; returns at once (the leader connects later)."""
        self._deliver = deliver
        self._campaign_task = asyncio.create_task(self._campaign(), name=f"elect:{self.name}")

    async def stop(self) -> None:
        """Stop campaigning; a leader disconnects and lets the lock go."""
        task, self._campaign_task = self._campaign_task, None
        if task is not None:
            task.cancel()
            # Not `await task` under suppress: that would swallow a cancellation of our caller.
            await asyncio.wait({task})

    def render(self, text: str) -> list[str]:
        """The inner platform's markup and limits (pure: needs no leadership)."""
        return self._inner.render(text)

    async def send(self, chat: ChatRef, text: str) -> str:
        return await self._leading(chat).send(chat, text)

    async def edit(self, chat: ChatRef, message_id: str, text: str) -> None:
        await self._leading(chat).edit(chat, message_id, text)

    async def typing(self, chat: ChatRef) -> None:
        await self._leading(chat).typing(chat)

    async def ask_approval(
        self,
        chat: ChatRef,
        request: ApprovalRequest,
        *,
        may_answer: Callable[[str], bool],
        timeout_s: float,
    ) -> ApprovalAnswer:
        """The leader's buttons (the press comes back through its polling or gateway)."""
        inner = self._leading(chat)
        if not isinstance(inner, ApprovalChannel):
            raise PlatformError(self.name, chat.chat_id, "this platform cannot ask for approval")
        return await inner.ask_approval(chat, request, may_answer=may_answer, timeout_s=timeout_s)

    async def wait_leading(self, leading: bool = True) -> None:
        """Return once this worker runs (or, with False, no longer runs) the connection."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.is_leader is leading)

    async def _set_leading(self, leading: bool) -> None:
        self.is_leader = leading
        async with self._changed:
            self._changed.notify_all()

    def _leading(self, chat: ChatRef) -> PlatformAdapter:
        if not self.is_leader:
            raise PlatformError(self.name, chat.chat_id, "another worker runs this platform")
        return self._inner

    async def _campaign(self) -> None:
        """Wait for leadership, serve a term, repeat; never raises but CancelledError."""
        while True:
            try:
                async with self._locks.lead(self.name, on_wait=self._following) as lease:
                    await self._serve_term(lease)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a task root: the store or the platform failed this term
                log.warning("leadership_term_failed", platform=self.name, error=str(exc)[:300])
            await asyncio.sleep(self._retry_s)

    async def _following(self) -> None:
        log.info("leadership_followed", platform=self.name)

    async def _serve_term(self, lease: Lease) -> None:
        assert self._deliver is not None
        inner = self._inner
        started = False
        try:
            await inner.start(self._deliver)  # a failed start cleans up after itself
            started = True
            self.terms += 1
            await self._set_leading(True)
            log.info("leadership_won", platform=self.name, terms=self.terms)
            await lease.wait_lost()
            log.warning("leadership_lost", platform=self.name)
        finally:
            try:
                if started:
                    await inner.stop()
            finally:
                self._inner = self._factory()  # a stopped adapter is never restarted
                await self._set_leading(False)
