"""The model server's capacity, shared by every session of a runtime: background work yields.

A local model server (llama.cpp, Ollama, LM Studio, a single vLLM slot) answers one request at a
time: a background summary it is busy with holds back the next user turn for as long as the
summary takes (a 7B model: tens of seconds). So on such a server (`model.concurrency: 1`, the
default for `provider: custom`) background work (a batch compaction prepared ahead, a micro
fold, a stopgap's upgrade) runs only while no user turn is in progress in any session of the
runtime, and a user turn that begins cancels whatever background work holds the server. The
cancelled work loses nothing: it never wrote (it works from a snapshot and proposes), and it
starts over from the fresh transcript in the next idle gap (`agent.background`).

With more capacity (hosted APIs; `model.concurrency` unset or above 1 elsewhere) nothing waits
and nothing is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

__all__ = ["ServerSlot", "resolve_concurrency"]

log = structlog.get_logger(__name__)


def resolve_concurrency(
    configured: int | None, *, provider: str, shares_server: bool
) -> int | None:
    """Requests the main model's server answers at once, as far as background work cares: the
    configured `model.concurrency`, else 1 for `provider: custom` (a local server) and no limit
    (None) for a hosted provider. A summarizer on a server of its own never competes with the
    user's turns: no limit then."""
    if not shares_server:
        return None
    if configured is not None:
        return configured
    return 1 if provider == "custom" else None


class ServerSlot:
    """Whether background work may use the model server now; one per runtime."""

    def __init__(self, concurrency: int | None = None) -> None:
        self.concurrency = concurrency
        self._turns = 0
        self._idle: asyncio.Event | None = None
        self._holders: set[asyncio.Task[object]] = set()
        self.preempted = 0
        """Background runs cancelled because a user turn began (they start over later)."""

    @property
    def yields(self) -> bool:
        """Background work gives way to user turns (a single-slot server)."""
        return self.concurrency == 1

    @property
    def turn_in_progress(self) -> bool:
        return self._turns > 0

    @contextmanager
    def user_turn(self) -> Iterator[None]:
        """A user turn runs: background work holding the server is cancelled, and no new work
        starts until every turn of the runtime has ended."""
        if not self.yields:
            yield
            return
        self._turns += 1
        self._event().clear()
        for task in list(self._holders):
            if not task.done():
                task.cancel()
                self.preempted += 1
                log.info("background_preempted", task=task.get_name())
        try:
            yield
        finally:
            self._turns -= 1
            if self._turns == 0:
                self._event().set()

    async def wait_idle(self) -> None:
        """Return once no user turn is in progress (at once when the server has capacity)."""
        if not self.yields:
            return
        while self._turns > 0:
            await self._event().wait()

    @contextmanager
    def holding(self, task: asyncio.Task[object]) -> Iterator[None]:
        """`task` uses the server for background work: a user turn that begins cancels it."""
        if not self.yields:
            yield
            return
        self._holders.add(task)
        try:
            yield
        finally:
            self._holders.discard(task)

    def _event(self) -> asyncio.Event:
        if self._idle is None:
            self._idle = asyncio.Event()
            if self._turns == 0:
                self._idle.set()
        return self._idle
