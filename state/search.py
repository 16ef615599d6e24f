"""Full-text search over every message, archived ones included: FTS5 on SQLite, tsvector on PostgreSQL.

A user's query is data. It is cut at whitespace into terms (`query_terms`): the words of a
piece, with the punctuation that joins them (`HRM-1154`, `foo.bar`, `v1.2.3`), form one term,
searched as a phrase, so a ticket tag finds the ticket, not every message that holds its number
somewhere and the prefix somewhere else. Each term is quoted: an FTS5 string (SQLite) or a
`websearch_to_tsquery` phrase (PostgreSQL), each tokenized by the engine as it tokenized the
messages; so no input is ever read as an operator or causes a syntax error (`match_queries`).
All terms must match; when nothing does, any term may, then any single word (ranked, so the
best still come first).
Only the newest `SEARCH_WINDOW` matches are ranked, so a common word stays fast at any size.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, assert_never

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Connection

from state._prepared import sqlite_rows
from state.values import SearchHit

__all__ = [
    "SEARCH_WINDOW",
    "SearchFilters",
    "Syntax",
    "Term",
    "match_expression",
    "match_queries",
    "query_terms",
    "run_search",
    "syntax_of",
]

SEARCH_WINDOW = 1_000
"""Ranking looks at the newest this-many matches only (recency first, then bm25 / ts_rank).
The trade-off: a query whose words occur in more messages than this finds the best of the
newest matches, not of all of them; add a word or a filter to reach further back."""
MAX_QUERY_CHARS = 20_000
MAX_TERMS = 16
MAX_PHRASE_WORDS = 16
MAX_TERM_CHARS = 64
"""...per word of a term, and per run of other characters in it."""
_WORD = re.compile(r"[^\W_]+")
"""Letters and digits: what FTS5's unicode61 and PostgreSQL's parser keep (`_` separates)."""
_UNSAFE = re.compile(r'["\\\x00\ud800-\udfff]')
"""What could end or escape a quoted phrase (a quote, a backslash for PostgreSQL), end FTS5's
reading of it (NUL), or cannot be encoded for a driver (a lone surrogate)."""
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


@dataclass(frozen=True, slots=True)
class Term:
    """One whitespace-separated piece of a query that holds words: its words, and `text`, the
    words joined by the punctuation between them (`hrm-1154`), which each engine tokenizes as
    it tokenized the messages and matches as a phrase (the words next to each other, in order).
    `text` holds only word characters and printable punctuation other than `"` and `\\`, so it
    is safe inside a quoted FTS5 string and a quoted `websearch_to_tsquery` phrase."""

    words: tuple[str, ...]
    text: str


def query_terms(query: str) -> list[Term]:
    """The distinct terms of a query, in order: at most MAX_TERMS, of at most MAX_PHRASE_WORDS
    words of at most MAX_TERM_CHARS characters each."""
    terms: list[Term] = []
    for piece in query[:MAX_QUERY_CHARS].lower().split():
        term = _term(piece)
        if term is not None and term not in terms:
            terms.append(term)
            if len(terms) == MAX_TERMS:
                break
    return terms


def _term(piece: str) -> Term | None:
    """The term of one piece without whitespace: its words, and as its text the piece itself
    (so each engine splits it as it split the message that holds it), with every word and
    every run between words cut at MAX_TERM_CHARS and `_UNSAFE` made a space; None without a
    word. A piece of more than MAX_PHRASE_WORDS words ends before the next word."""
    found = list(itertools.islice(_WORD.finditer(piece), MAX_PHRASE_WORDS + 1))
    if not found:
        return None
    kept = found[:MAX_PHRASE_WORDS]
    stop = found[-1].start() if len(found) > MAX_PHRASE_WORDS else len(piece)
    words = tuple(m.group(0)[:MAX_TERM_CHARS] for m in kept)
    starts = [0, *(m.end() for m in kept)]
    ends = [*(m.start() for m in kept), stop]
    joints = [_safe_joint(piece[a:b]) for a, b in zip(starts, ends, strict=True)]
    text = "".join(j + w for j, w in zip(joints, (*words, ""), strict=True))
    return Term(words=words, text=text)


def _safe_joint(joint: str) -> str:
    """The characters between two words, at most MAX_TERM_CHARS, `_UNSAFE` replaced by a
    space (a separator to both engines, as the replaced character was)."""
    return _UNSAFE.sub(" ", joint[:MAX_TERM_CHARS])


Syntax = Literal["fts5", "tsquery"]
"""`fts5`: an FTS5 MATCH expression (SQLite); `tsquery`: input for `websearch_to_tsquery`."""


def match_queries(query: str, syntax: Syntax) -> list[str]:
    """The expressions to try for `query`, in order, until one finds something: every term
    (as a phrase), then any term, then any single word (for a term whose words occur apart).
    [] for a query without words."""
    terms = query_terms(query)
    words = list(dict.fromkeys(w for t in terms for w in t.words))
    tries = [match_expression(terms, syntax)]
    if len(terms) > 1:
        tries.append(match_expression(terms, syntax, any_term=True))
    single = [Term(words=(w,), text=w) for w in words]
    if not set(single) <= set(terms):
        tries.append(match_expression(single, syntax, any_term=True))
    return tries if terms else []


def match_expression(terms: Sequence[Term], syntax: Syntax, *, any_term: bool = False) -> str:
    """Every term as a quoted phrase (so no term can be read as an operator), all of them
    required, or any of them when `any_term`."""
    match syntax:
        case "fts5":
            quoted = ['"' + t.text.replace('"', '""') + '"' for t in terms]
            return (" OR " if any_term else " AND ").join(quoted)
        case "tsquery":
            phrases = ['"' + t.text.replace('"', " ").replace("\\", " ") + '"' for t in terms]
            return (" or " if any_term else " ").join(phrases)
        case _:
            assert_never(syntax)


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
    """Ranked hits for `query` (all terms, else any term, else any word: `match_queries`);
    [] for a query without words."""
    if filters.limit <= 0:
        return []
    hits: list[SearchHit] = []
    for q in match_queries(query, syntax_of(conn)):
        hits = _run(conn, q, filters)
        if hits:
            break
    return hits


def syntax_of(conn: Connection) -> Syntax:
    """The match syntax of the connection's engine (the store runs on SQLite or PostgreSQL)."""
    return "fts5" if conn.dialect.name == "sqlite" else "tsquery"


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


def _run(conn: Connection, q: str, filters: SearchFilters) -> list[SearchHit]:
    where, params = _filter_sql(filters)
    marks = {"open": _SNIPPET_OPEN, "close": _SNIPPET_CLOSE, "ell": _ELLIPSIS}
    if conn.dialect.name == "sqlite":
        span = _SQLITE_SPAN if filters.session_id is not None else ""
        joins = _SQLITE_JOINED if where else ""
        if filters.owner is not None and _owner_first(conn, filters.owner, q):
            others, _ = _filter_sql(replace(filters, owner=None))
            joins, where = "", _SQLITE_OWNED.format(filters=others)
        sql = _SQLITE_SQL.format(joins=joins, span=span, filters=where, **marks)
    else:
        by_session = filters.platform is not None or filters.owner is not None
        joined = " JOIN sessions s ON s.id = m.session_id" if by_session else ""
        sql = _PG_SQL.format(sessions_join=joined, filters=where, **marks)
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
