"""The transcript of a session: its messages appended, loaded, shown, compacted and restored.

`SqlTranscript` implements `state.contract.Transcript` (`SqlSessionStore.transcript`). The
active transcript is the session's top positions; compaction soft-archives rows
(`archive_and_compact`: `active=0` and why, `archived_by`), it never deletes them, and `restore_active`
makes a chosen, ordered list of rows the active set again (undoing a compaction).

Writers lock the session first (`SELECT ... FOR UPDATE` on PostgreSQL, `BEGIN IMMEDIATE` on
SQLite), so appends and compactions of one session never interleave. Every public method is one
transaction; in-memory messages are stamped (`_id`, `_persisted`) only after it commits.

Restoring: the chosen rows are renumbered, in the order given, into fresh positions at the top;
every other active row is archived (`archived_by="uncompact"`), and a restored row is active again
(`compacted=0`, no reason). Nothing
is deleted and nothing inserted: the rows are the same rows. A crash mid-way leaves the session
as it was before (the transaction rolls back) or as it is after.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection

from state._connection import StoreConnection
from state._statements import (
    _ACTIVE_KEYS,
    _ARCHIVE,
    _COUNT_COMPACTED,
    _COUNT_KIND,
    _LOAD_ACTIVE,
    _LOAD_ALL,
    _R,
    _RENUMBER,
    _S,
    archive_params,
    insert_rows,
    reserve_positions,
)
from state.catalog import locked_session, new_session, session_info
from state.contract import ArchiveReason, CompactionKind, ExportFormat
from state.export import export_jsonl, export_markdown
from state.instructions import copy_instructions
from state.models import MESSAGES
from state.records import (
    CompactionPlan,
    message_from_row,
    plan_compaction,
    row_from_message,
    row_key,
)
from state.store_errors import ConcurrentModification, StoreError
from state.values import ChatMessage, SessionInfo, Usage

if TYPE_CHECKING:
    from state.meta import SqlMetaStore

__all__ = ["SqlTranscript"]

log = structlog.get_logger("state.store")

_M = MESSAGES
_SET_ROW = (
    update(_M)
    .where(_M.c.id == bindparam("row_id"))
    .values(position=bindparam("new_position"), active=True, compacted=False, archived_by=None)
)


class SqlTranscript:
    """Sessions' messages over one store connection; usage counted through `meta`."""

    def __init__(self, conn: StoreConnection, meta: SqlMetaStore) -> None:
        self._conn = conn
        self._meta = meta

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
                await self._meta.record_usage(session_id, usage)
            return 0
        n = len(pending)

        def body(conn: Connection) -> list[int]:
            # One statement locks the session row and reserves positions [start, start + n).
            end = reserve_positions(conn, session_id, n, usage, time.time())
            if end is None:
                raise StoreError(f"no session {session_id!r}")
            ids = _insert(conn, session_id, pending, range(end - n, end))
            self._conn._fault("append:inserted")
            return ids

        await self._conn._write("append", body, on_commit=lambda ids: _stamp(pending, ids))
        return n

    async def load_active(self, session_id: str) -> list[ChatMessage]:
        """The active transcript in order: what a resume sends to the model."""
        params = {"p_sid": session_id}
        return await self._conn._read(
            "load_active",
            lambda conn: [message_from_row(r._mapping) for r in conn.execute(_LOAD_ACTIVE, params)],
        )

    async def show(self, session_id: str, *, include_archived: bool = False) -> list[ChatMessage]:
        """The active transcript, or every row (flagged `_active`/`_compacted`) with include_archived."""
        stmt = _LOAD_ALL if include_archived else _LOAD_ACTIVE

        def body(conn: Connection) -> list[ChatMessage]:
            if session_info(conn, session_id) is None:
                raise StoreError(f"no session {session_id!r}")
            rows = conn.execute(stmt, {"p_sid": session_id})
            return [message_from_row(r._mapping, flags=include_archived) for r in rows]

        return await self._conn._read("show", body)

    async def archive_and_compact(
        self,
        session_id: str,
        new_active: list[ChatMessage],
        *,
        expected_version: int | None = None,
        kind: CompactionKind | None = None,
        archived_by: ArchiveReason | None = None,
    ) -> None:
        """Make `new_active` the active transcript in one transaction; archive what it replaces.

        Unchanged messages still carrying an active row's `_id` keep their row (only renumbered);
        everything else active becomes active=0 with its reason (`archived_by`, default
        "compaction", which alone also sets compacted=1); the rest of new_active is inserted
        once. With `expected_version`, a session changed since raises ConcurrentModification.
        `kind` counts the compaction in the same transaction, so the counter cannot drift.
        """
        started = time.perf_counter()
        plan, ids, archived = await self._conn._write(
            "archive_and_compact",
            lambda conn: self._compact_tx(
                conn, session_id, new_active, expected_version, kind, archived_by
            ),
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
        archived_by: ArchiveReason | None = None,
    ) -> tuple[CompactionPlan, list[int], int]:
        """The statements of archive_and_compact: renumber, archive, insert, count."""
        session = locked_session(conn, session_id)
        if expected_version is not None and session["version"] != expected_version:
            raise ConcurrentModification(
                f"session {session_id} is at version {session['version']}, "
                f"expected {expected_version}"
            )
        self._conn._fault("archive_and_compact:locked")
        plan = plan_compaction(new_active, self._active_keys(conn, session_id, new_active))
        base = session["next_position"]  # the new active set takes [base, base + len)
        if plan.carried:
            renumbered = [{"row_id": rid, "new_position": base + i} for i, rid in plan.carried]
            conn.execute(_RENUMBER, renumbered)
        self._conn._fault("archive_and_compact:renumbered")
        reason = archived_by or "compaction"
        archived = conn.execute(_ARCHIVE, archive_params(session_id, base, reason))
        self._conn._fault("archive_and_compact:archived")
        fresh = [new_active[i] for i in plan.inserted]
        ids = _insert(conn, session_id, fresh, [base + i for i in plan.inserted])
        self._conn._fault("archive_and_compact:inserted")
        counts = {"p_next": base + len(new_active), "p_active": len(new_active), "p_n": len(fresh)}
        count = _COUNT_COMPACTED if kind is None else _COUNT_KIND[kind]
        conn.execute(count, {"p_sid": session_id, "p_now": time.time(), **counts})
        self._conn._fault("archive_and_compact:counted")
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
        info, _ids = await self._conn._write(
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
        old = locked_session(conn, session_id)
        keep = ("platform", "chat_key", "user_id", "title", "model", "lineage_head", "owner")
        child = new_session(conn, parent_session_id=session_id, **{k: old[k] for k in keep})
        ids = _insert(conn, child, new_active, range(len(new_active)))
        copy_instructions(conn, session_id, child)
        self._conn._fault("rotate:inserted")
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
        self._conn._fault("rotate:routed")
        info = session_info(conn, child)
        assert info is not None
        return info, ids

    async def restore_active(
        self, session_id: str, ordered_ids: Sequence[int], *, expected_version: int | None
    ) -> int:
        """Make exactly `ordered_ids` (rows of this session, archived or not) the active
        transcript, in that order; returns how many rows were archived by it. Refused with
        StoreError when an id is not this session's, ConcurrentModification when the session
        moved past `expected_version`."""
        wanted = [int(i) for i in ordered_ids]
        if not wanted or len(set(wanted)) != len(wanted):
            raise StoreError("restore_active needs distinct row ids")

        def body(conn: Connection) -> int:
            session = conn.execute(
                select(_S).where(_S.c.id == session_id).with_for_update()
            ).one_or_none()
            if session is None:
                raise StoreError(f"no session {session_id!r}")
            if expected_version is not None and session.version != expected_version:
                raise ConcurrentModification(
                    f"session {session_id} is at version {session.version}, "
                    f"expected {expected_version}"
                )
            found = conn.execute(
                select(_M.c.id).where((_M.c.session_id == session_id) & _M.c.id.in_(wanted))
            ).scalars()
            if set(found) != set(wanted):
                raise StoreError(f"rows not in session {session_id}: {sorted(set(wanted))[:5]}…")
            archived = conn.execute(
                update(_M)
                .where(
                    (_M.c.session_id == session_id) & _M.c.active.is_(True) & _M.c.id.not_in(wanted)
                )
                .values(active=False, compacted=False, archived_by="uncompact")
            ).rowcount
            self._conn._fault("restore_active:archived")
            base = int(session.next_position)
            conn.execute(
                _SET_ROW,
                [{"row_id": rid, "new_position": base + i} for i, rid in enumerate(wanted)],
            )
            self._conn._fault("restore_active:renumbered")
            conn.execute(
                update(_S)
                .where(_S.c.id == session_id)
                .values(
                    next_position=base + len(wanted),
                    active_messages=len(wanted),
                    last_prompt_tokens=0,
                    version=_S.c.version + 1,
                    updated_at=time.time(),
                )
            )
            return int(archived)

        return await self._conn._write("restore_active", body)

    async def export(self, session_id: str, fmt: ExportFormat) -> str:
        """Every row of the session, archived included, as JSON Lines or Markdown."""
        if fmt not in ("jsonl", "md"):
            raise ValueError(f"unknown export format {fmt!r}; use jsonl or md")
        info, messages = await self._conn._read(
            "export", lambda conn: _everything(conn, session_id)
        )
        return export_jsonl(info, messages) if fmt == "jsonl" else export_markdown(info, messages)


def _insert(
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
    return insert_rows(conn, session_id, rows)


def _everything(conn: Connection, session_id: str) -> tuple[SessionInfo, list[ChatMessage]]:
    """The session and every row of it, archived included (flagged), in one read."""
    info = session_info(conn, session_id)
    if info is None:
        raise StoreError(f"no session {session_id!r}")
    rows = conn.execute(_LOAD_ALL, {"p_sid": session_id})
    return info, [message_from_row(r._mapping, flags=True) for r in rows]


def _stamp(messages: Sequence[ChatMessage], ids: Sequence[int]) -> None:
    """Mark committed messages in place with their row ids (on the event loop, after commit)."""
    for msg, row_id in zip(messages, ids, strict=True):
        msg["_id"] = row_id
        msg["_persisted"] = True
