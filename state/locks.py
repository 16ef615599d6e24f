"""Named locks across processes: a session's turn lock and a poller's leadership.

`NamedLocks` implements `state.contract.SessionLocks` (`SqlSessionStore.locks`: `lock_session`,
`lead`). `NamedLocks.hold(name, timeout_s=..., on_wait=...)` is the one way in. It takes the process's own
gate first (an asyncio.Lock per name, so two tasks of one worker never share a database lock),
then the database's: a PostgreSQL advisory lock (`state._pg_locks`) or, on SQLite, a row of
`leases` with an expiry that the holder keeps renewing (`state._lock_backends`). Both die with
their holder: the advisory lock with its connection, the lease once nobody renews it.

Waiting is bounded by `timeout_s` (None: until cancelled) and ends in `SessionBusy`; `on_wait`
runs once when the lock was not free at once. The lock is released on every exit path,
cancellation included (the release itself is shielded and bounded).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

import structlog

from state.store_errors import SessionBusy

__all__ = ["HeldLease", "NamedLocks", "OnWait", "holder_id"]

log = structlog.get_logger(__name__)

OnWait = Callable[[], Awaitable[None]]
"""Called once when a lock is not free at once (e.g. to tell the user "busy, queued")."""


def holder_id() -> str:
    """Unique per acquisition: host, process and a random part."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


@dataclass(eq=False, slots=True, kw_only=True)
class HeldLease:
    """A lock this process holds; satisfies `state.contract.Lease`."""

    name: str
    holder: str
    waited: bool = False
    """The lock was not free at once (another holder had it)."""
    token: object = None
    """The backend's handle (PostgreSQL: the connection that holds it)."""
    released: bool = False
    _lost: asyncio.Event = field(default_factory=asyncio.Event)

    def is_lost(self) -> bool:
        """The lock is known to be gone (its connection died, or the lease was taken over)."""
        return self._lost.is_set()

    async def wait_lost(self) -> None:
        """Return once the lock is known to be gone."""
        await self._lost.wait()

    def mark_lost(self, why: str) -> None:
        if not self.released and not self._lost.is_set():
            log.warning("lease_lost", name=self.name, why=why)
            self._lost.set()


class _Deadline:
    """The wait budget of one acquisition, and the once-only `on_wait` call."""

    def __init__(self, name: str, timeout_s: float | None, on_wait: OnWait | None) -> None:
        self.name = name
        self._started = time.monotonic()
        self._end = None if timeout_s is None else self._started + max(0.0, timeout_s)
        self._on_wait = on_wait
        self.waited = False

    def remaining(self) -> float | None:
        """Seconds left to wait (0: none); None means no bound."""
        return None if self._end is None else max(0.0, self._end - time.monotonic())

    async def begin_wait(self) -> None:
        if self.waited:
            return
        self.waited = True
        if self._on_wait is not None:
            try:
                await self._on_wait()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failed notice never blocks the lock
                log.warning("lock_wait_notice_failed", name=self.name, error=type(exc).__name__)

    def busy(self) -> SessionBusy:
        return SessionBusy(self.name, waited_s=time.monotonic() - self._started)


class NamedLocks(ABC):
    """In-process gates plus a database backend (`_acquire` / `_release` in subclasses)."""

    def __init__(self, *, op_timeout_s: float) -> None:
        self._op_timeout_s = op_timeout_s
        self._gates: dict[str, asyncio.Lock] = {}
        self._gate_users: dict[str, int] = {}
        self._background: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def hold(
        self,
        name: str,
        *,
        timeout_s: float | None,
        on_wait: OnWait | None = None,
        watch: bool = False,
    ) -> AsyncIterator[HeldLease]:
        """Hold `name` for the body; `watch` keeps checking a long-held lock is still ours."""
        deadline = _Deadline(name, timeout_s, on_wait)
        async with self._gate(name, deadline):
            lease = await self._acquire(name, deadline, watch=watch)
            log.debug("lease_acquired", name=name, waited=lease.waited)
            try:
                yield lease
            finally:
                await self._release_shielded(lease)

    def lock_session(
        self, session_id: str, *, timeout_s: float, on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[HeldLease]:
        """The session's turn lock across processes."""
        return self.hold(f"session:{session_id}", timeout_s=timeout_s, on_wait=on_wait)

    def lead(
        self, role: str, *, on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[HeldLease]:
        """Wait to be the one process holding `role`; the lock is watched while held."""
        return self.hold(f"leader:{role}", timeout_s=None, on_wait=on_wait, watch=True)

    async def aclose(self) -> None:
        """Let releases in flight finish (bounded), then close the backend."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=self._op_timeout_s)
        await self._close()

    # -- subclass interface ---------------------------------------------------------------------

    @abstractmethod
    async def _acquire(self, name: str, deadline: _Deadline, *, watch: bool) -> HeldLease:
        """Take `name` in the backend (the process's gate is held), waiting within `deadline`."""

    @abstractmethod
    async def _release(self, lease: HeldLease) -> None:
        """Give the backend's hold on `lease` back."""

    async def _close(self) -> None:
        return None

    # -- shared plumbing ------------------------------------------------------------------------

    @asynccontextmanager
    async def _gate(self, name: str, deadline: _Deadline) -> AsyncIterator[None]:
        gate = self._gates.setdefault(name, asyncio.Lock())
        self._gate_users[name] = self._gate_users.get(name, 0) + 1
        try:
            if gate.locked():
                if deadline.remaining() == 0:
                    raise deadline.busy()
                await deadline.begin_wait()
            try:
                async with asyncio.timeout(deadline.remaining()):
                    await gate.acquire()
            except TimeoutError:
                raise deadline.busy() from None
            try:
                yield
            finally:
                gate.release()
        finally:
            self._gate_users[name] -= 1
            if not self._gate_users[name]:
                del self._gate_users[name], self._gates[name]

    async def _release_shielded(self, lease: HeldLease) -> None:
        """Release even when the holder is being cancelled; never raises a backend error."""
        task = self._spawn(self._release_bounded(lease), f"lease-release:{lease.name}")
        await asyncio.shield(task)

    async def _release_bounded(self, lease: HeldLease) -> None:
        lease.released = True
        try:
            async with asyncio.timeout(self._op_timeout_s):
                await self._release(lease)
        except Exception as exc:  # the lock still dies with its connection or its expiry
            log.warning("lease_release_failed", name=lease.name, error=type(exc).__name__)

    def _spawn(self, coro: Awaitable[None], name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        task.set_name(name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task
