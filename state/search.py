"""Full-text search over every message, archived ones included: FTS5 on SQLite, tsvector on PostgreSQL.

A user's query is data. It is reduced to word terms (`query_terms`), and each term is quoted
(FTS5) or handed to `websearch_to_tsquery` (PostgreSQL), so no input can cause a syntax error.
All terms must match; when nothing does, any term may (ranked, so the best still come first).
Only the newest `SEARCH_WINDOW` matches are ranked, so a common word stays fast at any size.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Connection

from state._prepared import sqlite_rows
from state.values import SearchHit

__all__ = [
    "SEARCH_WINDOW",
    "SearchFilters",
    "fts5_expression",
    "query_terms",
    "run_search",
    "tsquery_text",
]

SEARCH_WINDOW = 1_000
"""Ranking looks at the newest this-many matches only (recency first, then bm25 / ts_rank).
The trade-off: a query whose words occur in more messages than this finds the best of the
newest matches, not of all of them; add a word or a filter to reach further back."""
MAX_TERMS = 16
MAX_TERM_CHARS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
_SNIPPET_OPEN, _SNIPPET_CLOSE, _ELLIPSIS = "[", "]", "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchFilters:
    owner: str | None = None
    """Only sessions of this owner (`state.owners`); None: every owner's."""
    session_id: str | None = None
    platform: str | None = None
    role: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 20
    superseded_summaries: bool = True
    """False leaves out archived summary markers: a newer summary or the original rows say it."""


def query_terms(query: str) -> list[str]:
    """The distinct word terms of a query, in order; at most MAX_TERMS of MAX_TERM_CHARS each."""
    terms: list[str] = []
    for match in _WORD.finditer(query[:20_000]):
        term = match.group(0).lower()[:MAX_TERM_CHARS]
        if term not in terms:
            terms.append(term)
        if len(terms) == MAX_TERMS:
            break
    return terms


def fts5_expression(terms: list[str], *, any_term: bool = False) -> str:
    """An FTS5 MATCH expression with every term quoted as a string (quotes doubled)."""
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms]
    return (" OR " if any_term else " AND ").join(quoted)


def tsquery_text(terms: list[str], *, any_term: bool = False) -> str:
    """Input for `websearch_to_tsquery`: the terms, joined by `or` when any term may match."""
    return (" or " if any_term else " ").join(terms)


def _filter_sql(filters: SearchFilters) -> tuple[str, dict[str, Any]]:
    clauses: list[str] = []
    params: dict[str, object] = {}
    for column, value in (
        ("m.session_id", filters.session_id),
        ("s.platform", filters.platform),
        ("s.owner", filters.owner),
        ("m.role", filters.role),
    ):
        if value is not None:
            name = column.split(".")[1]
            clauses.append(f"{column} = :{name}")
            params[name] = value
    if filters.since is not None:
        clauses.append("m.created_at >= :since")
        params["since"] = float(filters.since)
    if filters.until is not None:
        clauses.append("m.created_at < :until")
        params["until"] = float(filters.until)
    if not filters.superseded_summaries:
        clauses.append("NOT (m.kind = 'summary' AND m.active = :inactive)")
        params["inactive"] = False
    return "".join(f" AND {c}" for c in clauses), params


# Recency-first window, then rank: the newest SEARCH_WINDOW matches (FTS5 walks a term's doclist
# backwards cheaply, so a word found in most messages costs a window, not the whole index) are
# ranked in the same pass (bm25 only for the rows that pass the filters), and the best `limit`
# of them kept. snippet() then runs for those rows only (on every match it costs ~4x the ranking
# itself), in one more pass over the range they span (`span`, computed once: as subqueries in
# the WHERE it cost a third of a rare word's search); never one FTS5 lookup per row, because
# each new FTS5 cursor counts the term's documents again for bm25. CROSS JOIN pins the FTS5
# table as the outer loop, so bm25 is computed once per query. A session filter bounds the scan
# to the session's own id span.
_SQLITE_SPAN = (
    " AND messages_fts.rowid BETWEEN (SELECT min(id) FROM messages WHERE session_id = :session_id)"
    " AND (SELECT max(id) FROM messages WHERE session_id = :session_id)"
)
_SQLITE_JOINED = (
    " CROSS JOIN messages m ON m.id = messages_fts.rowid"
    " CROSS JOIN sessions s ON s.id = m.session_id"
)
# An owner with a small share of the store, searching a word that is not rare: their message
# ids are gathered first (through the owner index), and the scan keeps the matches among them,
# so finding their newest matches does not join every match of a common word to its session
# (0.5% of 100k messages, a word in all of them: 470 ms to ~40 ms).
_SQLITE_OWNED = (
    " AND +messages_fts.rowid IN (SELECT m.id FROM sessions s"
    " CROSS JOIN messages m ON m.session_id = s.id WHERE s.owner = :owner{filters})"
)
_SQLITE_OWNER_SIZE = text(
    "SELECT count(*), coalesce(sum(n), 0), (SELECT coalesce(max(id), 0) FROM messages)"
    " FROM (SELECT total_messages AS n FROM sessions WHERE owner = :owner LIMIT :most)"
)
OWNER_SET_SHARE = 20
"""An owner holding at most 1/this of the messages is searched through their own ids first."""
OWNER_SET_SESSIONS = 1_000
"""...and has fewer sessions than this (so the deciding count stays a fraction of a millisecond)."""
OWNER_SET_MATCHES = 4
"""...when the query matches at least 1/this as many messages as the owner holds: joining each
match to its session costs about this many times what gathering one of the owner's ids does, so
a rarer query is cheaper the other way (counted up to that bound, no further)."""
_SQLITE_MATCHES_UP_TO = text(
    "SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH :q LIMIT :most)"
)
_SQLITE_SQL = """
WITH top AS MATERIALIZED (
  SELECT id, rank FROM (
    SELECT messages_fts.rowid AS id, messages_fts.rank AS rank FROM messages_fts{joins}
    WHERE messages_fts MATCH :q{span}{filters}
    ORDER BY messages_fts.rowid DESC LIMIT :window
  ) ORDER BY rank, id DESC LIMIT :limit
),
span AS MATERIALIZED (SELECT min(id) AS lo, max(id) AS hi FROM top)
SELECT m.id, m.session_id, m.role, m.created_at, m.active, s.platform,
       snippet(messages_fts, 0, '{open}', '{close}', '{ell}', 16) AS snippet,
       -top.rank AS rank
FROM span
CROSS JOIN messages_fts
CROSS JOIN top ON top.id = messages_fts.rowid
CROSS JOIN messages m ON m.id = top.id
CROSS JOIN sessions s ON s.id = m.session_id
WHERE messages_fts MATCH :q AND messages_fts.rowid BETWEEN span.lo AND span.hi
ORDER BY top.rank, m.id DESC
"""

# The query is written out in each WHERE (not taken from a CTE) and plans are custom per call
# (`plan_cache_mode`), so the planner sees how common the words are: a backward primary-key scan
# for a common word, the GIN index for a rare one. `random_page_cost` says what is true of a
# searched archive (its pages are cached): with the default 4.0 the planner keeps the backward
# scan far past the point where the index is faster (131 ms against 76 ms at 1M messages).
_PG_PLANNER = text(
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), "
    "set_config('random_page_cost', '1.1', true)"
)
_PG_SQL = """
WITH cand AS (
  SELECT m.id FROM messages m{sessions_join}
  WHERE m.tsv @@ websearch_to_tsquery('simple', :q){filters}
  ORDER BY m.id DESC
  LIMIT :window
),
top AS (
  SELECT m.id, m.session_id, m.role, m.created_at, m.active, m.content,
         ts_rank(m.tsv, websearch_to_tsquery('simple', :q)) AS rank
  FROM cand JOIN messages m ON m.id = cand.id
  ORDER BY rank DESC, m.id DESC
  LIMIT :limit
)
SELECT top.id, top.session_id, top.role, top.created_at, top.active, s.platform,
       ts_headline('simple', coalesce(top.content, ''), websearch_to_tsquery('simple', :q),
                   'StartSel={open}, StopSel={close}, FragmentDelimiter={ell}, '
                   'MaxFragments=1, MaxWords=20, MinWords=6') AS snippet,
       top.rank
FROM top JOIN sessions s ON s.id = top.session_id
ORDER BY top.rank DESC, top.id DESC
"""


def run_search(conn: Connection, query: str, filters: SearchFilters) -> list[SearchHit]:
    """Ranked hits for `query` (all terms, else any term); [] for a query without words."""
    terms = query_terms(query)
    if not terms or filters.limit <= 0:
        return []
    hits = _run(conn, terms, filters, any_term=False)
    if not hits and len(terms) > 1:
        hits = _run(conn, terms, filters, any_term=True)
    return hits


@functools.lru_cache(maxsize=256)
def _statement(sql: str) -> TextClause:
    """One `text()` per distinct query shape: built (and its binds parsed) once, then found in
    SQLAlchemy's compiled cache by identity instead of rebuilt on every search."""
    return text(sql)


def _owner_first(conn: Connection, owner: str, q: str) -> bool:
    """Whether to search from `owner`'s own message ids: the owner holds at most
    1/OWNER_SET_SHARE of the messages (ids are dense enough that the newest id stands for the
    count), in fewer than OWNER_SET_SESSIONS sessions, and `q` is not rare (OWNER_SET_MATCHES)."""
    params = {"owner": owner, "most": OWNER_SET_SESSIONS}
    sessions, owned, newest = conn.execute(_SQLITE_OWNER_SIZE, params).one()
    small = int(sessions) < OWNER_SET_SESSIONS and int(owned) * OWNER_SET_SHARE <= int(newest)
    if not small:
        return False
    enough = max(1, int(owned) // OWNER_SET_MATCHES)
    matches = conn.execute(_SQLITE_MATCHES_UP_TO, {"q": q, "most": enough}).scalar_one()
    return int(matches) >= enough


def _run(
    conn: Connection, terms: list[str], filters: SearchFilters, *, any_term: bool
) -> list[SearchHit]:
    where, params = _filter_sql(filters)
    marks = {"open": _SNIPPET_OPEN, "close": _SNIPPET_CLOSE, "ell": _ELLIPSIS}
    if conn.dialect.name == "sqlite":
        span = _SQLITE_SPAN if filters.session_id is not None else ""
        joins = _SQLITE_JOINED if where else ""
        q = fts5_expression(terms, any_term=any_term)
        if filters.owner is not None and _owner_first(conn, filters.owner, q):
            others, _ = _filter_sql(replace(filters, owner=None))
            joins, where = "", _SQLITE_OWNED.format(filters=others)
        sql = _SQLITE_SQL.format(joins=joins, span=span, filters=where, **marks)
    else:
        by_session = filters.platform is not None or filters.owner is not None
        joined = " JOIN sessions s ON s.id = m.session_id" if by_session else ""
        sql = _PG_SQL.format(sessions_join=joined, filters=where, **marks)
        q = tsquery_text(terms, any_term=any_term)
        conn.execute(_PG_PLANNER)
    bound = {"q": q, "limit": int(filters.limit), "window": SEARCH_WINDOW, **params}
    if conn.dialect.name == "sqlite":
        rows = sqlite_rows(conn, sql, bound)
    else:
        rows = [tuple(row) for row in conn.execute(_statement(sql), bound)]
    return [_hit(*row) for row in rows]


def _hit(
    message_id: int,
    session_id: str,
    role: str,
    created_at: float,
    active: object,
    platform: str,
    snippet: str | None,
    rank: float,
) -> SearchHit:
    """A hit from a row of either query (same columns, same order)."""
    return SearchHit(
        session_id=session_id,
        message_id=int(message_id),
        role=role,
        snippet=" ".join((snippet or "").split()),
        created_at=float(created_at),
        active=bool(active),
        platform=platform,
        rank=float(rank),
    )
