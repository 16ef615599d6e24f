"""PostgreSQL advisory locks behind `state.locks.NamedLocks`.

A free lock is taken with `pg_try_advisory_lock` on one connection the process shares for all
its locks (advisory locks are per connection, so one connection can hold many; the in-process
gate keeps their re-entrancy from ever mattering). A busy lock is waited for on a connection of
its own with `SET lock_timeout` and `pg_advisory_lock`, so PostgreSQL itself wakes the waiter
the moment the holder unlocks or its connection dies (a killed worker). Long-held locks (poller
leadership) always get their own connection and a heartbeat, so a lost connection is noticed.

Keys are 64-bit hashes of the database, the schema and the lock's name, so two schemas of one
database (tests, tenants) never share a lock.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import asyncpg
import structlog
from sqlalchemy.engine import make_url

from state.locks import HeldLease, NamedLocks, _Deadline
from state.store_errors import StoreError

__all__ = ["PgAdvisoryLocks", "advisory_key"]

log = structlog.get_logger(__name__)

WAIT_CHUNK_S = 30.0
"""An unbounded wait is a series of bounded ones, so a dead server is noticed."""
HEARTBEAT_S = 2.0
"""How often a long-held lock's connection is checked."""


def advisory_key(namespace: str, name: str) -> int:
    """The signed 64-bit advisory lock key of `name` within `namespace`."""
    digest = hashlib.blake2b(f"{namespace}\0{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PgAdvisoryLocks(NamedLocks):
    """Advisory locks on `url`'s database; `namespace` separates schemas sharing it."""

    def __init__(
        self, url: str, *, namespace: str, connect_timeout_s: float, op_timeout_s: float
    ) -> None:
        super().__init__(op_timeout_s=op_timeout_s)
        # The same server as the store's engine, as libpq-style DSN (sslmode and friends kept).
        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._connect_args: dict[str, Any] = {"dsn": dsn, "timeout": connect_timeout_s}
        self._namespace = namespace
        self._shared: asyncpg.Connection | None = None
        self._shared_guard = asyncio.Lock()
        self._on_shared: set[HeldLease] = set()
        self._heartbeats: dict[HeldLease, asyncio.Task[None]] = {}

    async def _acquire(self, name: str, deadline: _Deadline, *, watch: bool) -> HeldLease:
        key = advisory_key(self._namespace, name)
        if not watch and await self._try_shared(key):
            lease = HeldLease(name=name, holder="shared", waited=deadline.waited, token=key)
            self._on_shared.add(lease)
            return lease
        conn = await self._wait_on_own_connection(key, deadline)
        lease = HeldLease(
            name=name, holder=f"pid:{conn.get_server_pid()}", waited=deadline.waited, token=conn
        )
        if watch:  # a closed connection is seen at once; a silently dead one by the heartbeat
            conn.add_termination_listener(lambda _conn: lease.mark_lost("its connection closed"))
            self._heartbeats[lease] = self._spawn(
                self._heartbeat(lease, conn), f"lease-heartbeat:{name}"
            )
        return lease

    async def _release(self, lease: HeldLease) -> None:
        token = lease.token
        if isinstance(token, asyncpg.Connection):
            heartbeat = self._heartbeats.pop(lease, None)
            if heartbeat is not None:
                heartbeat.cancel()
            await token.close(timeout=self._op_timeout_s)  # closing releases its lock
            return
        self._on_shared.discard(lease)
        assert isinstance(token, int)
        released = await self._shared_fetch("SELECT pg_advisory_unlock($1)", token)
        if not released:
            log.warning("lease_already_gone", name=lease.name)

    async def aclose(self) -> None:
        for heartbeat in self._heartbeats.values():
            heartbeat.cancel()
        self._heartbeats.clear()
        await super().aclose()

    async def _close(self) -> None:
        shared, self._shared = self._shared, None
        if shared is not None:
            try:
                await shared.close(timeout=self._op_timeout_s)
            except Exception:
                shared.terminate()

    # -- the shared connection ------------------------------------------------------------------

    async def _try_shared(self, key: int) -> bool:
        """`pg_try_advisory_lock` that never leaks a lock its cancelled caller did not see."""
        task = asyncio.ensure_future(self._shared_fetch("SELECT pg_try_advisory_lock($1)", key))
        try:
            return bool(await asyncio.shield(task))
        except asyncio.CancelledError:
            task.add_done_callback(lambda done: self._undo_unseen_lock(done, key))
            raise

    def _undo_unseen_lock(self, done: asyncio.Future[Any], key: int) -> None:
        if not done.cancelled() and done.exception() is None and done.result():
            self._spawn(self._unlock_quietly(key), "lease-undo")

    async def _unlock_quietly(self, key: int) -> None:
        try:
            await self._shared_fetch("SELECT pg_advisory_unlock($1)", key)
        except StoreError as exc:
            log.warning("lease_undo_failed", error=str(exc)[:200])

    async def _shared_fetch(self, query: str, key: int) -> Any:
        async with self._shared_guard:
            try:
                conn = self._shared
                if conn is None or conn.is_closed():
                    conn = self._shared = await asyncpg.connect(**self._connect_args)
                    conn.add_termination_listener(self._on_shared_closed)
                return await conn.fetchval(query, key, timeout=self._op_timeout_s)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                self._drop_shared()
                raise StoreError(f"session locks: {type(exc).__name__}") from exc

    def _on_shared_closed(self, _conn: object) -> None:
        for lease in list(self._on_shared):
            lease.mark_lost("the lock connection closed")
        self._on_shared.clear()

    def _drop_shared(self) -> None:
        conn, self._shared = self._shared, None
        if conn is not None and not conn.is_closed():
            conn.terminate()
        self._on_shared_closed(conn)

    # -- waiting and long holds -----------------------------------------------------------------

    async def _wait_on_own_connection(self, key: int, deadline: _Deadline) -> asyncpg.Connection:
        """A connection holding `key`, once PostgreSQL grants it; SessionBusy after the bound."""
        try:
            conn = await asyncpg.connect(**self._connect_args)
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            raise StoreError(f"session locks: cannot connect: {type(exc).__name__}") from exc
        try:
            if await conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
                return conn
            if deadline.remaining() == 0:
                raise deadline.busy()
            await deadline.begin_wait()
            while True:
                remaining = deadline.remaining()
                chunk = WAIT_CHUNK_S if remaining is None else min(remaining, WAIT_CHUNK_S)
                await conn.execute(f"SET lock_timeout = {max(1, int(chunk * 1000))}")
                try:
                    await conn.fetchval("SELECT pg_advisory_lock($1)", key, timeout=chunk + 10)
                    return conn
                except asyncpg.LockNotAvailableError:
                    if deadline.remaining() == 0:
                        raise deadline.busy() from None
        except BaseException as exc:
            conn.terminate()  # whatever was granted dies with the connection
            if isinstance(exc, OSError | TimeoutError | asyncpg.PostgresError):
                raise StoreError(f"session locks: {type(exc).__name__}") from exc
            raise

    async def _heartbeat(self, lease: HeldLease, conn: asyncpg.Connection) -> None:
        """Check a long-held lock's connection every few seconds; a dead one loses the lock."""
        while not conn.is_closed():
            await asyncio.sleep(HEARTBEAT_S)
            if conn.is_closed():
                break
            try:
                await conn.fetchval("SELECT 1", timeout=HEARTBEAT_S * 2)
            except asyncpg.InterfaceError:
                break  # closed by the release meanwhile
            except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
                log.warning("lease_heartbeat_failed", name=lease.name, error=type(exc).__name__)
                conn.terminate()
                lease.mark_lost("its connection failed")
                return
        lease.mark_lost("its connection closed")
