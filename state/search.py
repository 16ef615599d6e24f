"""Full-text search over every message, archived ones included: FTS5 on SQLite, tsvector on PostgreSQL.

A user's query is data. It is reduced to word terms (`query_terms`), and each term is quoted
(FTS5) or handed to `websearch_to_tsquery` (PostgreSQL), so no input can cause a syntax error.
All terms must match; when nothing does, any term may (ranked, so the best still come first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from state.values import SearchHit

__all__ = [
    "SearchFilters",
    "fts5_expression",
    "query_terms",
    "run_search",
    "tsquery_text",
]

MAX_TERMS = 16
MAX_TERM_CHARS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
_SNIPPET_OPEN, _SNIPPET_CLOSE, _ELLIPSIS = "[", "]", "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchFilters:
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


_SQLITE_TOP_PLAIN = "SELECT rowid AS id, rank FROM messages_fts WHERE messages_fts MATCH :q"
_SQLITE_TOP_FILTERED = (
    "SELECT messages_fts.rowid AS id, messages_fts.rank AS rank FROM messages_fts "
    "JOIN messages m ON m.id = messages_fts.rowid JOIN sessions s ON s.id = m.session_id "
    "WHERE messages_fts MATCH :q{filters}"
)
# Rank inside FTS5 first, then join and build snippets for the top rows only: snippet() on every
# match before the LIMIT costs ~4x the ranking itself. CROSS JOIN pins the join order.
_SQLITE_SQL = """
WITH top AS ({top} ORDER BY rank LIMIT :limit)
SELECT m.id, m.session_id, m.role, m.created_at, m.active, s.platform,
       snippet(messages_fts, 0, '{open}', '{close}', '{ell}', 16) AS snippet,
       -top.rank AS rank
FROM top
CROSS JOIN messages_fts
CROSS JOIN messages m ON m.id = top.id
CROSS JOIN sessions s ON s.id = m.session_id
WHERE messages_fts MATCH :q AND messages_fts.rowid = top.id
ORDER BY top.rank, m.id DESC
"""

_PG_SQL = """
WITH q AS (SELECT websearch_to_tsquery('simple', :q) AS query),
top AS (
  SELECT m.id, m.session_id, m.role, m.created_at, m.active, s.platform, m.content,
         ts_rank(m.tsv, q.query) AS rank
  FROM messages m JOIN sessions s ON s.id = m.session_id, q
  WHERE m.tsv @@ q.query{filters}
  ORDER BY rank DESC, m.id DESC
  LIMIT :limit
)
SELECT top.id, top.session_id, top.role, top.created_at, top.active, top.platform, top.rank,
       ts_headline('simple', coalesce(top.content, ''), q.query,
                   'StartSel={open}, StopSel={close}, FragmentDelimiter={ell}, '
                   'MaxFragments=1, MaxWords=20, MinWords=6') AS snippet
FROM top, q
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


def _run(
    conn: Connection, terms: list[str], filters: SearchFilters, *, any_term: bool
) -> list[SearchHit]:
    where, params = _filter_sql(filters)
    marks = {"open": _SNIPPET_OPEN, "close": _SNIPPET_CLOSE, "ell": _ELLIPSIS, "filters": where}
    if conn.dialect.name == "sqlite":
        top = (_SQLITE_TOP_FILTERED if where else _SQLITE_TOP_PLAIN).format(filters=where)
        sql = _SQLITE_SQL.format(top=top, **marks)
        q = fts5_expression(terms, any_term=any_term)
    else:
        sql, q = _PG_SQL.format(**marks), tsquery_text(terms, any_term=any_term)
    result = conn.execute(text(sql), {"q": q, "limit": int(filters.limit), **params})
    return [
        SearchHit(
            session_id=row.session_id,
            message_id=int(row.id),
            role=row.role,
            snippet=" ".join((row.snippet or "").split()),
            created_at=float(row.created_at),
            active=bool(row.active),
            platform=row.platform,
            rank=float(row.rank),
        )
        for row in result
    ]
