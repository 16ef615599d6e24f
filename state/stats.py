"""Whole-store statistics for `hermes sessions stats`: counts, token totals, size on disk."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection

from state.migrations import SCHEMA_VERSION
from state.models import MESSAGES, SESSIONS

__all__ = ["collect_stats"]

_S, _M = SESSIONS, MESSAGES
_TOKENS = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_write": "cache_write_tokens",
    "cache_read": "cache_read_tokens",
}
_COMPACTIONS = {
    "batch": "compactions",
    "micro": "micro_compactions",
    "native": "native_compactions",
}


def collect_stats(conn: Connection) -> dict[str, Any]:
    """Sessions, messages by state and kind, token and compaction totals, database bytes."""
    columns = [*_TOKENS.values(), *_COMPACTIONS.values()]
    sums = conn.execute(select(*(func.coalesce(func.sum(_S.c[c]), 0) for c in columns)))
    totals = dict(zip(columns, map(int, sums.one()), strict=True))
    platforms = conn.execute(select(_S.c.platform, func.count()).group_by(_S.c.platform))
    by_platform = {p: int(n) for p, n in platforms}
    open_sessions = conn.execute(select(func.count()).where(_S.c.end_reason.is_(None)))
    grouped = select(_M.c.active, _M.c.kind, func.count()).group_by(_M.c.active, _M.c.kind)
    counts = [(bool(a), k, int(n)) for a, k, n in conn.execute(grouped)]
    return {
        "dialect": conn.dialect.name,
        "schema_version": SCHEMA_VERSION,
        "sessions": sum(by_platform.values()),
        "open_sessions": int(open_sessions.scalar_one()),
        "platforms": by_platform,
        "messages": sum(n for _, _, n in counts),
        "active_messages": sum(n for a, _, n in counts if a),
        "archived_messages": sum(n for a, _, n in counts if not a),
        "summary_messages": sum(n for _, k, n in counts if k == "summary"),
        "tokens": {name: totals[col] for name, col in _TOKENS.items()},
        "compactions": {name: totals[col] for name, col in _COMPACTIONS.items()},
        "db_bytes": _db_bytes(conn),
    }


def _db_bytes(conn: Connection) -> int:
    if conn.dialect.name == "sqlite":
        pages = conn.execute(text("PRAGMA page_count")).scalar_one()
        page_size = conn.execute(text("PRAGMA page_size")).scalar_one()
        return int(pages) * int(page_size)
    sql = (
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
    )
    return int(conn.execute(text(sql)).scalar_one())
