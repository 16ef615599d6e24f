"""Finding messages again: ranked full-text search, and rows read back by id.

`SqlSessionSearch` implements `state.contract.SessionSearch` (`SqlSessionStore.search`); the
SQL of search is `state.search`. `read_rows` is how `recall` and the `lcm` tools get archived
messages back verbatim (by anchor range, by the ids a search found, or page by page through a
whole session). Both read archived rows too, and both take `owner` into the query itself, so a
reader never sees another owner's rows (`state.views`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select

from state._connection import StoreConnection
from state.models import MESSAGES, SESSIONS
from state.search import SearchFilters, run_search
from state.values import ArchivedRow, SearchHit

__all__ = ["MAX_READ_ROWS", "SqlSessionSearch"]

MAX_READ_ROWS = 1_000
"""One `read_rows` call returns at most this many rows."""
_M, _S = MESSAGES, SESSIONS
_ROW_COLS = (
    _M.c.id,
    _M.c.session_id,
    _M.c.role,
    _M.c.content,
    _M.c.tool_calls,
    _M.c.name,
    _M.c.kind,
    _M.c.active,
    _M.c.created_at,
    _M.c.extra,
)


class SqlSessionSearch:
    """Search and row reads over one store connection."""

    def __init__(self, conn: StoreConnection) -> None:
        self._conn = conn

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
        return await self._conn._read("search", lambda conn: run_search(conn, cleaned, filters))

    async def read_rows(
        self,
        session_id: str,
        *,
        ids: Sequence[int] | None = None,
        first_id: int | None = None,
        last_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
        include_summaries: bool = False,
        owner: str | None = None,
    ) -> list[ArchivedRow]:
        """The session's rows in id (that is, chronological) order, archived ones included.

        Either the given `ids`, or every row with `first_id <= id <= last_id` (open ends
        allowed), paged by `limit` and `offset`. Archived summary markers are left out unless
        `include_summaries` (a newer summary or the original rows say what they said). With
        `owner`, a session of another owner has no rows (checked in the same query).
        """
        limit = max(0, min(int(limit), MAX_READ_ROWS))
        if limit == 0 or (ids is not None and not ids):
            return []
        where = _M.c.session_id == session_id
        if owner is not None:
            owned = select(_S.c.id).where((_S.c.id == session_id) & (_S.c.owner == owner))
            where &= _M.c.session_id.in_(owned)
        if ids is not None:
            where &= _M.c.id.in_(sorted({int(i) for i in ids})[:MAX_READ_ROWS])
        if first_id is not None:
            where &= _M.c.id >= int(first_id)
        if last_id is not None:
            where &= _M.c.id <= int(last_id)
        if not include_summaries:
            where &= (_M.c.kind != "summary") | _M.c.active.is_(True)
        stmt = select(*_ROW_COLS).where(where).order_by(_M.c.id).limit(limit)
        stmt = stmt.offset(max(0, int(offset)))
        return await self._conn._read(
            "read_rows", lambda conn: [_archived_row(r._mapping) for r in conn.execute(stmt)]
        )


def _archived_row(row: Mapping[Any, Any]) -> ArchivedRow:
    return ArchivedRow(
        id=int(row["id"]),
        session_id=row["session_id"],
        role=row["role"],
        text=row["content"] or "",
        tool_calls=tuple(row["tool_calls"] or ()),
        name=row["name"],
        kind="summary" if row["kind"] == "summary" else "normal",
        active=bool(row["active"]),
        created_at=float(row["created_at"]),
        media=tuple((row["extra"] or {}).get("_media") or ()),
    )
