"""SqlSessionStore: sessions and messages on SQLite or PostgreSQL; compaction archives, never deletes.

Writers lock the session first (`SELECT ... FOR UPDATE` on PostgreSQL, `BEGIN IMMEDIATE` on
SQLite), so appends and compactions of one session never interleave. Every public method is one
transaction; in-memory messages are stamped (`_id`, `_persisted`) only after it commits.
Turn locks and poller leadership across processes live in `state.locks`.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import structlog
from sqlalchemy import Update, delete, select, text, update
from sqlalchemy.engine import Connection, make_url

from state._connection import FaultHook, OpObserver, refuse_directory, refuse_empty_file
from state._lock_backends import open_locks
from state._statements import (
    _ACTIVE_KEYS,
    _ARCHIVE,
    _COMPACTION_COUNTERS,
    _COUNT_COMPACTED,
    _COUNT_KIND,
    _IDS_AT,
    _INSERT_MESSAGES,
    _LOAD_ACTIVE,
    _LOAD_ALL,
    _LOCK,
    _R,
    _RECORD_USAGE,
    _RENUMBER,
    _RESERVE,
    _RESERVE_WITH_USAGE,
    _S,
    _SET_META,
    _SID,
    _TOUCH,
    usage_params,
)
from state.chat_routes import ChatRouteOps
from state.contract import CompactionKind, ExportFormat, Lease, OnWait, SessionView
from state.engine import describe_database, dialect_of, make_engine, make_sync_sqlite_engine
from state.export import export_jsonl, export_markdown
from state.jobs import SqlJobStore
from state.lineage_heads import LineageOps
from state.locks import HeldLease, NamedLocks
from state.memory import MemoryOps
from state.migrations import apply_migrations
from state.owners import LOCAL_OWNER
from state.records import (
    CompactionPlan,
    message_from_row,
    plan_compaction,
    row_from_message,
    row_key,
    session_fields,
    session_info_from_row,
)
from state.restore import RestoreOps
from state.rows_and_ledger import ArchiveOps, copy_instructions
from state.search import SearchFilters, run_search
from state.stats import collect_stats
from state.store_errors import ConcurrentModification, StoreError
from state.values import ChatMessage, ReadScope, SearchHit, SessionInfo, Usage
from state.views import OwnedSessionView

__all__ = ["DEFAULT_LEASE_TTL_S", "FaultHook", "SqlSessionStore"]

log = structlog.get_logger(__name__)

DEFAULT_LEASE_TTL_S = 10.0
"""SQLite: a lock whose holder stopped renewing it (a killed worker) is free after this."""


class SqlSessionStore(ChatRouteOps, ArchiveOps, LineageOps, RestoreOps, MemoryOps):
    """The memory of the assistant. Build with `await SqlSessionStore.open(url)`."""

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
        store._locks = open_locks(store, url, pg_schema, ttl_s=lease_ttl_s)
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

    _locks: NamedLocks
    _file: str | None = None

    def disk_free_bytes(self) -> int | None:
        """Free bytes on the SQLite file's disk (None for a server database, or unknown)."""
        if self._file is None:
            return None
        try:
            return shutil.disk_usage(os.path.dirname(os.path.abspath(self._file))).free
        except OSError:
            return None

    @property
    def jobs(self) -> SqlJobStore:
        """Scheduled jobs, in the same database (`state.jobs`)."""
        return SqlJobStore(self)

    async def aclose(self) -> None:
        await self._locks.aclose()
        await super().aclose()

    def lock_session(
        self, session_id: str, *, timeout_s: float, on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[Lease]:
        """The session's turn lock across processes (see `state.locks`)."""
        return self._locks.hold(f"session:{session_id}", timeout_s=timeout_s, on_wait=on_wait)

    def lead(
        self, role: str, *, on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[HeldLease]:
        """Wait to be the one process holding `role`; the lock is watched while held."""
        return self._locks.hold(f"leader:{role}", timeout_s=None, on_wait=on_wait, watch=True)

    def _lock(self, conn: Connection, session_id: str) -> dict[str, Any]:
        row = conn.execute(_LOCK, {"p_sid": session_id}).one_or_none()
        if row is None:
            raise StoreError(f"no session {session_id!r}")
        return dict(row._mapping)

    def _insert(
        self,
        conn: Connection,
        session_id: str,
        messages: Sequence[ChatMessage],
        positions: Sequence[int],
    ) -> list[int]:
        if not messages:
            return []
        now = time.time()
        rows = [
            row_from_message(m, session_id=session_id, position=p, now=now)
            for m, p in zip(messages, positions, strict=True)
        ]
        conn.execute(_INSERT_MESSAGES, rows)  # one executemany; RETURNING would go row by row
        # (session_id, position) is unique and we hold the session's lock: read the ids back.
        bounds = {"p_sid": session_id, "p_lo": min(positions), "p_hi": max(positions)}
        found = conn.execute(_IDS_AT, bounds)
        by_position = {int(p): int(i) for p, i in found}
        return [by_position[p] for p in positions]

    # -- sessions -------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        platform: str = "cli",
        chat_key: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        parent_session_id: str | None = None,
        owner: str = LOCAL_OWNER,
    ) -> SessionInfo:
        """A new session belonging to `owner` (`state.owners`; default the machine's owner)."""
        values = {
            **session_fields(
                {
                    "platform": platform,
                    "chat_key": chat_key,
                    "user_id": user_id,
                    "title": title,
                    "model": model,
                    "owner": owner,
                }
            ),
            "parent_session_id": parent_session_id,
        }

        def body(conn: Connection) -> SessionInfo | None:
            return self._session_info(conn, self._new_session(conn, **values))

        info = await self._write("create_session", body)
        assert info is not None
        log.info("session_created", session_id=info.id, platform=platform)
        return info

    async def delete_session(self, session_id: str) -> bool:
        """Remove a session and everything it holds (rows cascade); True if it existed. Only for
        a session that must leave no trace, such as the scratch session of a Responses request
        with `store: false`; compaction never deletes."""

        def body(conn: Connection) -> bool:
            gone = conn.execute(delete(_S).where(_S.c.id == session_id))
            return bool(gone.rowcount)

        return bool(await self._write("delete_session", body))

    async def get_session(self, session_id: str) -> SessionInfo | None:
        return await self._read("get_session", lambda conn: self._session_info(conn, session_id))

    async def list_sessions(
        self, *, limit: int = 50, platform: str | None = None, owner: str | None = None
    ) -> list[SessionInfo]:
        """The newest sessions, of one platform and of one owner when given (None: all)."""
        stmt = select(_S).order_by(_S.c.updated_at.desc(), _S.c.id.desc()).limit(limit)
        if platform is not None:
            stmt = stmt.where(_S.c.platform == platform)
        if owner is not None:
            stmt = stmt.where(_S.c.owner == owner)
        return await self._read(
            "list_sessions",
            lambda conn: [session_info_from_row(r._mapping) for r in conn.execute(stmt)],
        )

    # -- messages -------------------------------------------------------------------------------

    async def append(
        self, session_id: str, messages: Sequence[ChatMessage], *, usage: Usage | None = None
    ) -> int:
        """Insert, in order, the messages not yet persisted; stamp them in place; return how many.

        `usage` (the model call that produced them) is added to the totals in the same
        transaction, so a turn step costs one write.
        """
        pending = [m for m in messages if not m.get("_persisted")]
        if not pending:
            if usage is not None:
                await self.record_usage(session_id, usage)
            return 0
        n = len(pending)
        reserve = _RESERVE if usage is None else _RESERVE_WITH_USAGE
        params = {"p_sid": session_id, "p_n": n, **(usage_params(usage) if usage else {})}

        def body(conn: Connection) -> list[int]:
            # One statement locks the session row and reserves positions [start, start + n).
            end = conn.execute(reserve, {**params, "p_now": time.time()}).scalar_one_or_none()
            if end is None:
                raise StoreError(f"no session {session_id!r}")
            ids = self._insert(conn, session_id, pending, range(end - n, end))
            self._fault("append:inserted")
            return ids

        await self._write("append", body, on_commit=lambda ids: _stamp(pending, ids))
        return n

    async def load_active(self, session_id: str) -> list[ChatMessage]:
        """The active transcript in order: what a resume sends to the model."""
        params = {"p_sid": session_id}
        return await self._read(
            "load_active",
            lambda conn: [message_from_row(r._mapping) for r in conn.execute(_LOAD_ACTIVE, params)],
        )

    async def show(self, session_id: str, *, include_archived: bool = False) -> list[ChatMessage]:
        """The active transcript, or every row (flagged `_active`/`_compacted`) with include_archived."""
        stmt = _LOAD_ALL if include_archived else _LOAD_ACTIVE

        def body(conn: Connection) -> list[ChatMessage]:
            if self._session_info(conn, session_id) is None:
                raise StoreError(f"no session {session_id!r}")
            rows = conn.execute(stmt, {"p_sid": session_id})
            return [message_from_row(r._mapping, flags=include_archived) for r in rows]

        return await self._read("show", body)

    async def archive_and_compact(
        self,
        session_id: str,
        new_active: list[ChatMessage],
        *,
        expected_version: int | None = None,
        kind: CompactionKind | None = None,
    ) -> None:
        """Make `new_active` the active transcript in one transaction; archive what it replaces.

        Unchanged messages still carrying an active row's `_id` keep their row (only renumbered);
        everything else active becomes active=0, compacted=1; the rest of new_active is inserted
        once. With `expected_version`, a session changed since raises ConcurrentModification.
        `kind` counts the compaction in the same transaction, so the counter cannot drift.
        """
        started = time.perf_counter()
        plan, ids, archived = await self._write(
            "archive_and_compact",
            lambda conn: self._compact_tx(conn, session_id, new_active, expected_version, kind),
            on_commit=lambda done: _stamp([new_active[i] for i in done[0].inserted], done[1]),
        )
        log.info(
            "session_compacted",
            session_id=session_id,
            archived=archived,
            carried=len(plan.carried),
            inserted=len(ids),
            ms=round((time.perf_counter() - started) * 1000, 1),
        )

    def _compact_tx(
        self,
        conn: Connection,
        session_id: str,
        new_active: list[ChatMessage],
        expected_version: int | None,
        kind: CompactionKind | None,
    ) -> tuple[CompactionPlan, list[int], int]:
        """The statements of archive_and_compact: renumber, archive, insert, count."""
        session = self._lock(conn, session_id)
        if expected_version is not None and session["version"] != expected_version:
            raise ConcurrentModification(
                f"session {session_id} is at version {session['version']}, "
                f"expected {expected_version}"
            )
        self._fault("archive_and_compact:locked")
        plan = plan_compaction(new_active, self._active_keys(conn, session_id, new_active))
        base = session["next_position"]  # the new active set takes [base, base + len)
        if plan.carried:
            renumbered = [{"row_id": rid, "new_position": base + i} for i, rid in plan.carried]
            conn.execute(_RENUMBER, renumbered)
        self._fault("archive_and_compact:renumbered")
        archived = conn.execute(_ARCHIVE, {"p_sid": session_id, "p_lo": base})
        self._fault("archive_and_compact:archived")
        fresh = [new_active[i] for i in plan.inserted]
        ids = self._insert(conn, session_id, fresh, [base + i for i in plan.inserted])
        self._fault("archive_and_compact:inserted")
        counts = {"p_next": base + len(new_active), "p_active": len(new_active), "p_n": len(fresh)}
        count = _COUNT_COMPACTED if kind is None else _COUNT_KIND[kind]
        conn.execute(count, {"p_sid": session_id, "p_now": time.time(), **counts})
        self._fault("archive_and_compact:counted")
        return plan, ids, int(archived.rowcount)

    def _active_keys(
        self, conn: Connection, session_id: str, messages: Sequence[ChatMessage]
    ) -> dict[int, Any]:
        ids = sorted({m["_id"] for m in messages if isinstance(m.get("_id"), int)})
        keys: dict[int, Any] = {}
        for start in range(0, len(ids), 500):
            chunk = {"p_sid": session_id, "p_ids": ids[start : start + 500]}
            for row in conn.execute(_ACTIVE_KEYS, chunk):
                keys[int(row.id)] = row_key(row._mapping)
        return keys

    async def rotate(self, session_id: str, new_active: list[ChatMessage]) -> SessionInfo:
        """Rotating compaction: `new_active` starts a child session; the old one ends ("compression")."""
        info, _ids = await self._write(
            "rotate",
            lambda conn: self._rotate_tx(conn, session_id, new_active),
            on_commit=lambda done: _stamp(new_active, done[1]),
        )
        log.info(
            "session_rotated",
            session_id=session_id,
            child_session_id=info.id,
            messages=len(new_active),
        )
        return info

    def _rotate_tx(
        self, conn: Connection, session_id: str, new_active: list[ChatMessage]
    ) -> tuple[SessionInfo, list[int]]:
        old = self._lock(conn, session_id)
        keep = ("platform", "chat_key", "user_id", "title", "model", "lineage_head", "owner")
        child = self._new_session(conn, parent_session_id=session_id, **{k: old[k] for k in keep})
        ids = self._insert(conn, child, new_active, range(len(new_active)))
        copy_instructions(conn, session_id, child)
        self._fault("rotate:inserted")
        n = len(new_active)
        conn.execute(
            update(_S)
            .where(_S.c.id == child)
            .values(next_position=n, active_messages=n, total_messages=n, version=1)
        )
        conn.execute(
            update(_S)
            .where(_S.c.id == session_id)
            .values(end_reason="compression", updated_at=time.time(), version=_S.c.version + 1)
        )
        conn.execute(
            update(_R)
            .where(_R.c.session_id == session_id)
            .values(session_id=child, updated_at=time.time())
        )
        self._fault("rotate:routed")
        info = self._session_info(conn, child)
        assert info is not None
        return info, ids

    # -- counters and meta ----------------------------------------------------------------------

    async def _update_session(
        self, op: str, session_id: str, stmt: Update, params: dict[str, Any]
    ) -> None:
        def body(conn: Connection) -> None:
            bound = {**params, "p_sid": session_id, "p_now": time.time()}
            if conn.execute(stmt, bound).rowcount == 0:
                raise StoreError(f"no session {session_id!r}")

        await self._write(op, body)

    async def record_usage(self, session_id: str, usage: Usage) -> None:
        """Add one call's usage to the session's totals; remember its prompt size."""
        await self._update_session("record_usage", session_id, _RECORD_USAGE, usage_params(usage))

    async def record_compaction(self, session_id: str, *, kind: CompactionKind) -> None:
        """Count one compaction of `kind` (batch | micro | native)."""
        column = _COMPACTION_COUNTERS.get(kind)
        if column is None:
            raise ValueError(f"unknown compaction kind {kind!r}; use batch, micro or native")
        stmt = update(_S).where(_S.c.id == _SID).values({column: _S.c[column] + 1, **_TOUCH})
        await self._update_session("record_compaction", session_id, stmt, {})

    async def get_meta(self, session_id: str) -> dict[str, Any]:
        info = await self.get_session(session_id)
        if info is None:
            raise StoreError(f"no session {session_id!r}")
        return info.meta

    async def update_meta(self, session_id: str, **changes: Any) -> None:
        """Merge `changes` into the session's meta dict; a value of None removes the key."""

        def body(conn: Connection) -> None:
            meta = dict(self._lock(conn, session_id)["meta"] or {})
            for key, value in changes.items():
                if value is None:
                    meta.pop(key, None)
                else:
                    meta[key] = value
            conn.execute(_SET_META, {"p_sid": session_id, "p_meta": meta, "p_now": time.time()})

        await self._write("update_meta", body)

    # -- search, export, stats ------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        platform: str | None = None,
        role: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 20,
        superseded_summaries: bool = True,
        owner: str | None = None,
    ) -> list[SearchHit]:
        """Ranked full-text hits over all messages, archived included; never a syntax error.

        `superseded_summaries=False` drops archived summary markers, which only repeat what a
        newer summary or the original rows say (the agent's tool asks for that). `owner`
        keeps only sessions of that owner, in the query itself (None: every owner's, the
        machine owner's view from the shell).
        """
        filters = SearchFilters(
            owner=owner,
            session_id=session_id,
            platform=platform,
            role=role,
            since=since,
            until=until,
            limit=max(0, min(int(limit), 200)),
            superseded_summaries=superseded_summaries,
        )
        cleaned = query.replace("\x00", " ")
        return await self._read("search", lambda conn: run_search(conn, cleaned, filters))

    async def export(self, session_id: str, fmt: ExportFormat) -> str:
        """Every row of the session, archived included, as JSON Lines or Markdown."""
        if fmt not in ("jsonl", "md"):
            raise ValueError(f"unknown export format {fmt!r}; use jsonl or md")
        info = await self.get_session(session_id)
        if info is None:
            raise StoreError(f"no session {session_id!r}")
        messages = await self.show(session_id, include_archived=True)
        return export_jsonl(info, messages) if fmt == "jsonl" else export_markdown(info, messages)

    async def stats(self) -> dict[str, Any]:
        """Counts and totals over the whole store."""
        return await self._read("stats", collect_stats)

    def view(self, scope: ReadScope) -> SessionView:
        """The store as a reader with `scope` may see it: every read filtered by its owner."""
        return OwnedSessionView(self, scope)


def _stamp(messages: Sequence[ChatMessage], ids: Sequence[int]) -> None:
    """Mark committed messages in place with their row ids (on the event loop, after commit)."""
    for msg, row_id in zip(messages, ids, strict=True):
        msg["_id"] = row_id
        msg["_persisted"] = True
