"""The lock backends: SQLite leases (rows of `leases` with an expiry) and choosing a backend.

SQLite has no lock that dies with its holder and no notification, so a lock is a row the holder
renews every third of `ttl_s`; a killed worker's row simply expires. Waiters look again (a cheap
read) after 5 ms, doubling up to 100 ms. PostgreSQL's advisory locks are in `state._pg_locks`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING

import structlog
from sqlalchemy import delete, select, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, make_url

from state.locks import HeldLease, NamedLocks, _Deadline, holder_id
from state.models import LEASES
from state.store_errors import StoreError

if TYPE_CHECKING:
    from state._connection import StoreConnection

__all__ = ["SqliteLeases", "open_locks"]

log = structlog.get_logger(__name__)

FIRST_POLL_S = 0.005
MAX_POLL_S = 0.1


def open_locks(
    conn: StoreConnection, url: str, pg_schema: str | None, *, ttl_s: float
) -> NamedLocks:
    """The lock backend for the store's database (nothing connects until a lock is taken)."""
    if conn.dialect != "postgresql":
        return SqliteLeases(conn, ttl_s=ttl_s, op_timeout_s=conn._op_timeout_s)
    from state._pg_locks import PgAdvisoryLocks

    namespace = f"{make_url(url).database}/{pg_schema or 'public'}"
    return PgAdvisoryLocks(
        url, namespace=namespace, connect_timeout_s=10.0, op_timeout_s=conn._op_timeout_s
    )


class SqliteLeases(NamedLocks):
    """Locks as rows of `leases` with an expiry, renewed every third of `ttl_s` while held."""

    def __init__(self, conn: StoreConnection, *, ttl_s: float, op_timeout_s: float) -> None:
        super().__init__(op_timeout_s=op_timeout_s)
        self._conn = conn
        self._ttl_s = ttl_s
        self._max_poll_s = min(MAX_POLL_S, ttl_s / 4)
        self._held: dict[str, HeldLease] = {}
        self._renewer: asyncio.Task[None] | None = None

    async def _acquire(self, name: str, deadline: _Deadline, *, watch: bool) -> HeldLease:
        holder = holder_id()
        delay = FIRST_POLL_S
        while True:
            taken = await self._conn._write(
                "lease_acquire", lambda c: _take(c, name, holder, time.time(), self._ttl_s)
            )
            if taken:
                lease = HeldLease(name=name, holder=holder, waited=deadline.waited)
                self._held[name] = lease
                self._start_renewer()
                return lease
            remaining = deadline.remaining()
            if remaining == 0:
                raise deadline.busy()
            await deadline.begin_wait()
            while True:  # look (a cheap read) until the lease ended or expired, then try again
                await asyncio.sleep(delay if remaining is None else min(delay, remaining))
                delay = min(delay * 2, self._max_poll_s)
                remaining = deadline.remaining()
                expires_at = await self._conn._read("lease_peek", lambda c: _peek(c, name))
                if expires_at is None or expires_at <= time.time():
                    break
                if remaining == 0:
                    raise deadline.busy()

    async def _release(self, lease: HeldLease) -> None:
        if self._held.get(lease.name) is lease:
            del self._held[lease.name]
        await self._conn._write("lease_release", lambda c: _drop(c, lease.name, lease.holder))

    async def _close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
            self._renewer = None

    def _start_renewer(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew_forever(), name="lease-renewer")

    async def _renew_forever(self) -> None:
        """Push every held lease's expiry forward; a lease found taken over is marked lost."""
        while True:
            await asyncio.sleep(self._ttl_s / 3)
            held = list(self._held.values())
            if not held:
                continue
            pairs = [(lease.name, lease.holder) for lease in held]
            expires_at = time.time() + self._ttl_s
            try:
                kept = await self._conn._write(
                    "lease_renew", functools.partial(_renew, pairs=pairs, expires_at=expires_at)
                )
            except StoreError as exc:
                log.warning("lease_renew_failed", held=len(held), error=str(exc)[:200])
                continue
            for lease in held:
                if (lease.name, lease.holder) not in kept:
                    lease.mark_lost("taken over after its lease expired")
                    if self._held.get(lease.name) is lease:
                        del self._held[lease.name]


def _take(conn: Connection, name: str, holder: str, now: float, ttl_s: float) -> bool:
    """Insert the lease, or take it over when it expired; True when `holder` has it now."""
    stmt = sqlite_insert(LEASES).values(name=name, holder=holder, expires_at=now + ttl_s)
    stmt = stmt.on_conflict_do_update(
        index_elements=[LEASES.c.name],
        set_={"holder": stmt.excluded.holder, "expires_at": stmt.excluded.expires_at},
        where=LEASES.c.expires_at <= now,
    )
    conn.execute(stmt)
    current = conn.execute(select(LEASES.c.holder).where(LEASES.c.name == name)).scalar()
    return bool(current == holder)


def _peek(conn: Connection, name: str) -> float | None:
    """When the current lease of `name` expires, or None when nobody holds it."""
    value = conn.execute(select(LEASES.c.expires_at).where(LEASES.c.name == name)).scalar()
    return None if value is None else float(value)


def _drop(conn: Connection, name: str, holder: str) -> None:
    conn.execute(delete(LEASES).where((LEASES.c.name == name) & (LEASES.c.holder == holder)))


def _renew(
    conn: Connection, pairs: list[tuple[str, str]], expires_at: float
) -> set[tuple[str, str]]:
    """The (name, holder) pairs still held after pushing their expiry to `expires_at`."""
    kept: set[tuple[str, str]] = set()
    for name, holder in pairs:
        stmt = (
            update(LEASES)
            .where((LEASES.c.name == name) & (LEASES.c.holder == holder))
            .values(expires_at=expires_at)
        )
        if conn.execute(stmt).rowcount:
            kept.add((name, holder))
    return kept
