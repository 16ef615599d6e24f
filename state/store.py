"""SqlSessionStore: the session store on SQLite or PostgreSQL, opened once and used by its roles.

It is the composition root of `state`: `open` connects and migrates, and the store holds one
object per role over that one connection (`state.contract.SessionStore`):

- `sessions` (`state.catalog`): create, find, list, name, delete; chat routes; lineage heads;
- `transcript` (`state.transcript`): append, load, show, compact (soft-archive), restore, export;
- `ledger` (`state.instructions`): the standing-instructions ledger;
- `search` (`state.rows`): ranked search and rows read back by id;
- `locks` (`state.locks`): turn locks and poller leadership across processes;
- `meta` (`state.meta`): usage and compaction counters, the meta record;
- `memory` (`state.memory`) and `jobs` (`state.jobs`).

Callers hold the role they use, not the store. Every public method of a role is one transaction.
"""

from __future__ import annotations

import os
import shutil

import structlog
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from state._connection import (
    FaultHook,
    OpObserver,
    StoreConnection,
    refuse_directory,
    refuse_empty_file,
)
from state._lock_backends import open_locks
from state.catalog import SqlSessionCatalog
from state.contract import SessionView
from state.engine import describe_database, dialect_of, make_engine, make_sync_sqlite_engine
from state.instructions import SqlInstructionLedger
from state.jobs import SqlJobStore
from state.locks import NamedLocks
from state.memory import SqlMemoryStore
from state.meta import SqlMetaStore
from state.migrations import apply_migrations
from state.rows import SqlSessionSearch
from state.transcript import SqlTranscript
from state.values import ReadScope
from state.views import OwnedSessionView

__all__ = ["DEFAULT_LEASE_TTL_S", "FaultHook", "SqlSessionStore"]

log = structlog.get_logger(__name__)

DEFAULT_LEASE_TTL_S = 10.0
"""SQLite: a lock whose holder stopped renewing it (a killed worker) is free after this."""


class SqlSessionStore(StoreConnection):
    """The memory of the assistant. Build with `await SqlSessionStore.open(url)`.

    It is the store's connection (`state._connection`), and holds the roles that use it."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        sync_engine: Engine | None = None,
        fault_hook: FaultHook | None = None,
        op_timeout_s: float = 60.0,
        on_op: OpObserver | None = None,
        where: str = "the session database",
    ) -> None:
        super().__init__(
            engine,
            sync_engine=sync_engine,
            fault_hook=fault_hook,
            op_timeout_s=op_timeout_s,
            on_op=on_op,
            where=where,
        )
        self.sessions = SqlSessionCatalog(self)
        self.meta = SqlMetaStore(self)
        self.transcript = SqlTranscript(self, self.meta)
        self.ledger = SqlInstructionLedger(self)
        self.search = SqlSessionSearch(self)
        self.memory = SqlMemoryStore(self)
        self.jobs = SqlJobStore(self)
        self._file: str | None = None

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        pg_schema: str | None = None,
        fault_hook: FaultHook | None = None,
        op_timeout_s: float = 60.0,
        lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
        on_op: OpObserver | None = None,
        verify: bool = False,
    ) -> SqlSessionStore:
        """Connect, apply migrations (refusing a newer schema with StoreError) and return the store.

        `on_op` hears every operation's name, duration and success (metrics). With `verify`, a
        SQLite file is checked first (`PRAGMA quick_check`, ~0.1 s per 200 MB) and a damaged
        one refused with StoreCorrupt, before anything writes to it."""
        dialect = dialect_of(url)
        database = make_url(url).database if dialect == "sqlite" else None
        refuse_directory(database)
        await refuse_empty_file(database)
        engine = make_engine(url, pg_schema=pg_schema)
        sync_engine = make_sync_sqlite_engine(url) if database and database != ":memory:" else None
        store = cls(
            engine,
            sync_engine=sync_engine,
            fault_hook=fault_hook,
            op_timeout_s=op_timeout_s,
            on_op=on_op,
            where=describe_database(url),
        )
        store.locks = open_locks(store, url, pg_schema, ttl_s=lease_ttl_s)
        store._file = database if database and database != ":memory:" else None
        try:
            async with store._guard("open"):
                if pg_schema and dialect == "postgresql":
                    async with engine.begin() as conn:
                        await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{pg_schema}"'))
                if verify:
                    await store._refuse_damage()
                found, now = await apply_migrations(engine)
        except BaseException:
            await store.aclose()
            raise
        log.info("store_opened", dialect=dialect, schema_version=now, found_version=found)
        return store

    locks: NamedLocks

    def disk_free_bytes(self) -> int | None:
        """Free bytes on the SQLite file's disk (None for a server database, or unknown)."""
        if self._file is None:
            return None
        try:
            return shutil.disk_usage(os.path.dirname(os.path.abspath(self._file))).free
        except OSError:
            return None

    async def aclose(self) -> None:
        await self.locks.aclose()
        await super().aclose()

    def view(self, scope: ReadScope) -> SessionView:
        """The store as a reader with `scope` may see it: every read filtered by its owner."""
        return OwnedSessionView(self.sessions, self.search, scope)
