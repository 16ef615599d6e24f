"""What Hermes remembers about each person: profile entries and notes, per owner, searchable.

`SqlMemoryStore` implements `state.contract.MemoryStore` (`SqlSessionStore.memory`). Every statement filters by `owner` in SQL, so
one person's memory is never read, changed or found through another's. Rows are never deleted:
a correction points the old row at its successor (`superseded_by`); forgetting erases the text
(the full-text index follows, by trigger or generated column) and sets `deleted`.

Search uses the store's full text (FTS5 on SQLite, tsvector on PostgreSQL), with the query
turned into quoted phrases exactly as `state.search` does (`match_queries`): all terms, else
any term, else any word. Entries
may also carry a vector (`memory.embeddings`); a search given the query's vector is hybrid, the
two rankings fused by reciprocal rank.
An entry is one line: whitespace is collapsed when it is stored.
"""

from __future__ import annotations

import heapq
import math
import operator
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.engine import Connection

from state._connection import StoreConnection
from state.models import MEMORY
from state.search import match_queries, query_terms, syntax_of
from state.store_errors import StoreError
from state.values import (
    MAX_MEMORY_CHARS,
    MemoryEntry,
    MemoryHit,
    MemoryKind,
    MemoryOrigin,
    storable_text,
)

__all__ = [
    "MAX_MEMORY_CHARS",
    "MAX_MEMORY_LIST",
    "SqlMemoryStore",
    "fuse_rankings",
    "pack_vector",
    "unpack_vector",
]

MAX_MEMORY_LIST = 1_000
"""One `list_memory` call returns at most this many entries."""
MAX_VECTOR_SCAN = 2_000
"""A hybrid search compares the query's vector with the newest this-many entries of the owner."""
MAX_DIMENSIONS = 8_192
MIN_SIMILARITY = 0.2
"""Vector neighbours below this cosine are not worth offering."""
RRF_K = 60
"""Reciprocal rank fusion's constant (Cormack et al. 2009): rank r scores 1 / (60 + r)."""
_M = MEMORY
_KINDS: frozenset[str] = frozenset({"profile", "note"})
_ORIGINS: frozenset[str] = frozenset({"tool", "compaction", "ledger", "user"})
_COLS = "m.id, m.owner, m.kind, m.text, m.origin, m.created_at, m.source_session_id, " + (
    "m.first_row_id, m.last_row_id, m.superseded_by, m.deleted"
)
_SQLITE_SEARCH = (
    "SELECT " + _COLS + ", -memory_fts.rank AS rank FROM memory_fts "
    "JOIN memory m ON m.id = memory_fts.rowid "
    "WHERE memory_fts MATCH :q AND m.owner = :owner AND m.deleted = :no "
    "AND m.superseded_by IS NULL{kind} ORDER BY memory_fts.rank, m.id DESC LIMIT :limit"
)
_PG_SEARCH = (
    "SELECT " + _COLS + ", ts_rank(m.tsv, websearch_to_tsquery('simple', :q)) AS rank "
    "FROM memory m WHERE m.tsv @@ websearch_to_tsquery('simple', :q) AND m.owner = :owner "
    "AND m.deleted = :no AND m.superseded_by IS NULL{kind} "
    "ORDER BY rank DESC, m.id DESC LIMIT :limit"
)


class SqlMemoryStore:
    """Memory reads and writes over one store connection, always for one owner."""

    def __init__(self, conn: StoreConnection) -> None:
        self._conn = conn

    async def add_memory(
        self,
        owner: str,
        text: str,
        *,
        kind: MemoryKind,
        origin: MemoryOrigin,
        source_session_id: str | None = None,
        first_row_id: int | None = None,
        last_row_id: int | None = None,
        supersedes: int | None = None,
    ) -> MemoryEntry:
        """Remember `text` for `owner`. The same text already current (any case or spacing)
        is returned instead of stored twice. With `supersedes`, that current entry of the same
        owner is corrected by this one in the same transaction (StoreError when there is none)."""
        cleaned = _cleaned(text)
        if kind not in _KINDS or origin not in _ORIGINS:
            raise StoreError(f"unknown memory kind or origin: {kind!r}, {origin!r}")
        if not owner:
            raise StoreError("memory needs an owner")

        def body(conn: Connection) -> MemoryEntry:
            same = _current_with_text(conn, owner, kind, cleaned)
            if same is not None and supersedes is None:
                return same
            if supersedes is not None and _current(conn, owner, supersedes) is None:
                raise StoreError(f"nothing remembered as #{supersedes}")
            values: dict[str, Any] = {
                "owner": owner,
                "kind": kind,
                "text": cleaned,
                "origin": origin,
                "created_at": time.time(),
                "source_session_id": source_session_id,
                "first_row_id": first_row_id,
                "last_row_id": last_row_id,
                "superseded_by": None,
                "deleted": False,
            }
            new_id = int(conn.execute(insert(_M).values(**values).returning(_M.c.id)).scalar_one())
            if supersedes is not None:
                conn.execute(
                    update(_M)
                    .where((_M.c.id == int(supersedes)) & (_M.c.owner == owner))
                    .values(superseded_by=new_id)
                )
            return _entry({**values, "id": new_id})

        return await self._conn._write("add_memory", body)

    async def list_memory(
        self,
        owner: str,
        *,
        kind: MemoryKind | None = None,
        include_history: bool = False,
        limit: int = MAX_MEMORY_LIST,
    ) -> list[MemoryEntry]:
        """`owner`'s current entries, oldest first; corrected and forgotten ones too with
        `include_history`."""
        where = _M.c.owner == owner
        if kind is not None:
            where &= _M.c.kind == kind
        if not include_history:
            where &= _M.c.deleted.is_(False) & _M.c.superseded_by.is_(None)
        stmt = select(_M).where(where).order_by(_M.c.id).limit(max(0, min(limit, MAX_MEMORY_LIST)))
        return await self._conn._read(
            "list_memory", lambda conn: [_entry(r._mapping) for r in conn.execute(stmt)]
        )

    async def get_memory(self, owner: str, entry_id: int) -> MemoryEntry | None:
        """One of `owner`'s entries (current or not); None when `owner` has no such entry."""
        stmt = select(_M).where((_M.c.id == int(entry_id)) & (_M.c.owner == owner))

        def body(conn: Connection) -> MemoryEntry | None:
            row = conn.execute(stmt).first()
            return None if row is None else _entry(row._mapping)

        return await self._conn._read("get_memory", body)

    async def forget_memory(self, owner: str, entry_id: int) -> MemoryEntry | None:
        """Forget one of `owner`'s entries: its text is erased, it leaves search and every
        future context. Returns it as it was; None when `owner` has no such live entry."""

        def body(conn: Connection) -> MemoryEntry | None:
            row = conn.execute(
                select(_M).where(
                    (_M.c.id == int(entry_id)) & (_M.c.owner == owner) & _M.c.deleted.is_(False)
                )
            ).first()
            if row is None:
                return None
            conn.execute(
                update(_M)
                .where(_M.c.id == int(entry_id))
                .values(text="", deleted=True, embedding=None, embedding_model=None)
            )
            return _entry(row._mapping)

        return await self._conn._write("forget_memory", body)

    async def set_memory_vector(
        self, owner: str, entry_id: int, *, model: str, vector: Sequence[float]
    ) -> bool:
        """Keep the vector of one of `owner`'s current entries; False when there is none."""
        packed = pack_vector(vector)
        if not packed:
            return False

        def body(conn: Connection) -> bool:
            result = conn.execute(
                update(_M)
                .where((_M.c.id == int(entry_id)) & (_M.c.owner == owner) & _M.c.deleted.is_(False))
                .values(embedding=packed, embedding_model=model)
            )
            return bool(result.rowcount)

        return await self._conn._write("set_memory_vector", body)

    async def search_memory(
        self,
        owner: str,
        query: str,
        *,
        kind: MemoryKind | None = None,
        limit: int = 10,
        vector: Sequence[float] | None = None,
        model: str | None = None,
    ) -> list[MemoryHit]:
        """`owner`'s current entries matching `query`, best first (`state.search.match_queries`).
        With the query's `vector` (made by `model`), hybrid: the full-text ranking and the
        cosine ranking of the entries with a vector of that model, fused by reciprocal rank."""
        terms = query_terms(query)
        wanted = pack_vector(vector) if vector is not None and model else b""
        if (not terms and not wanted) or limit <= 0:
            return []
        window = limit * 3 if wanted else limit

        def body(conn: Connection) -> list[MemoryHit]:
            hits: list[MemoryHit] = []
            for q in match_queries(query, syntax_of(conn)):
                hits = _search(conn, owner, q, kind, window)
                if hits:
                    break
            if not wanted:
                return hits
            assert model is not None
            near = _nearest(conn, owner, kind, unpack_vector(wanted), model, window)
            return fuse_rankings(hits, near)[:limit]

        return await self._conn._read("search_memory", body)


def _search(
    conn: Connection,
    owner: str,
    q: str,
    kind: MemoryKind | None,
    limit: int,
) -> list[MemoryHit]:
    kind_sql = " AND m.kind = :kind" if kind is not None else ""
    sql = _SQLITE_SEARCH if conn.dialect.name == "sqlite" else _PG_SEARCH
    params: dict[str, Any] = {"q": q, "owner": owner, "no": False, "limit": int(limit)}
    if kind is not None:
        params["kind"] = kind
    rows = conn.execute(text(sql.format(kind=kind_sql)), params)
    return [MemoryHit(entry=_entry(r._mapping), rank=float(r.rank)) for r in rows]


def _nearest(
    conn: Connection,
    owner: str,
    kind: MemoryKind | None,
    wanted: Sequence[float],
    model: str,
    limit: int,
) -> list[MemoryHit]:
    """The `limit` current entries of `owner` whose vectors (of `model`) are closest, among
    the newest MAX_VECTOR_SCAN (compared here: no vector index is loadable in this SQLite,
    and PostgreSQL has no pgvector unless installed)."""
    where = (
        (_M.c.owner == owner)
        & _M.c.deleted.is_(False)
        & _M.c.superseded_by.is_(None)
        & (_M.c.embedding_model == model)
    )
    if kind is not None:
        where &= _M.c.kind == kind
    rows = conn.execute(
        select(_M.c.id, _M.c.embedding).where(where).order_by(_M.c.id.desc()).limit(MAX_VECTOR_SCAN)
    )
    scored = [(_dot(wanted, unpack_vector(r.embedding)), int(r.id)) for r in rows]
    best = [(score, i) for score, i in heapq.nlargest(limit, scored) if score > MIN_SIMILARITY]
    if not best:
        return []
    found = {
        int(r.id): _entry(r._mapping)
        for r in conn.execute(select(_M).where(_M.c.id.in_([i for _, i in best])))
    }
    return [MemoryHit(entry=found[i], rank=score) for score, i in best if i in found]


def fuse_rankings(*rankings: Sequence[MemoryHit]) -> list[MemoryHit]:
    """Reciprocal rank fusion: each entry scores the sum of 1 / (RRF_K + rank) over the
    rankings it appears in (rank from 1); best first, ties by newest."""
    scores: dict[int, float] = {}
    entries: dict[int, MemoryEntry] = {}
    for ranking in rankings:
        for position, hit in enumerate(ranking, start=1):
            scores[hit.entry.id] = scores.get(hit.entry.id, 0.0) + 1.0 / (RRF_K + position)
            entries[hit.entry.id] = hit.entry
    order = sorted(scores, key=lambda i: (scores[i], i), reverse=True)
    return [MemoryHit(entry=entries[i], rank=scores[i]) for i in order]


def pack_vector(vector: Sequence[float]) -> bytes:
    """Normalized little-endian float32 bytes; b"" for an empty, zero or non-finite vector."""
    if not vector or len(vector) > MAX_DIMENSIONS:
        return b""
    norm = math.sqrt(sum(float(x) * float(x) for x in vector))
    if not norm or not math.isfinite(norm):
        return b""
    return struct.pack(f"<{len(vector)}f", *(float(x) / norm for x in vector))


def unpack_vector(data: bytes | None) -> tuple[float, ...]:
    if not data or len(data) % 4:
        return ()
    return struct.unpack(f"<{len(data) // 4}f", data)


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two normalized vectors; 0.0 when their dimensions differ."""
    if len(a) != len(b) or not a:
        return 0.0
    return float(sum(map(operator.mul, a, b)))


def _current(conn: Connection, owner: str, entry_id: int) -> MemoryEntry | None:
    row = conn.execute(
        select(_M).where(
            (_M.c.id == int(entry_id))
            & (_M.c.owner == owner)
            & _M.c.deleted.is_(False)
            & _M.c.superseded_by.is_(None)
        )
    ).first()
    return None if row is None else _entry(row._mapping)


def _current_with_text(conn: Connection, owner: str, kind: str, cleaned: str) -> MemoryEntry | None:
    """A current entry of `owner` with the same text (ASCII case aside)."""
    row = conn.execute(
        select(_M)
        .where(
            (_M.c.owner == owner)
            & (_M.c.kind == kind)
            & _M.c.deleted.is_(False)
            & _M.c.superseded_by.is_(None)
            & (func.lower(_M.c.text) == cleaned.lower())
        )
        .limit(1)
    ).first()
    return None if row is None else _entry(row._mapping)


def _cleaned(raw: str) -> str:
    cleaned = " ".join(storable_text(raw.replace("\x00", " ")).split())
    if not cleaned:
        raise StoreError("a memory needs some text")
    if len(cleaned) > MAX_MEMORY_CHARS:
        raise StoreError(f"a memory holds at most {MAX_MEMORY_CHARS} characters")
    return cleaned


def _entry(row: Mapping[Any, Any]) -> MemoryEntry:
    origin: MemoryOrigin = row["origin"] if row["origin"] in _ORIGINS else "tool"
    return MemoryEntry(
        id=int(row["id"]),
        owner=row["owner"],
        kind="profile" if row["kind"] == "profile" else "note",
        text=row["text"],
        origin=origin,
        created_at=float(row["created_at"]),
        source_session_id=row["source_session_id"],
        first_row_id=_int(row["first_row_id"]),
        last_row_id=_int(row["last_row_id"]),
        superseded_by=_int(row["superseded_by"]),
        deleted=bool(row["deleted"]),
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
