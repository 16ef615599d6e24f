"""The store's hot statements, built once with named parameters.

SQLAlchemy then reuses their cache keys and compiled forms, instead of building and hashing a
fresh statement on every call. Parameters are named `p_*`; `p_sid` is always the session id.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter

from state._prepared import Prepared
from state.models import CHAT_ROUTES, MESSAGES, SESSIONS
from state.values import Usage

_S, _M, _R = SESSIONS, MESSAGES, CHAT_ROUTES
_MSG_COLS = [c for c in _M.c if c.name not in ("session_id", "position", "token_estimate")]
_KEY_COLS = [_M.c.id, _M.c.role, _M.c.content, _M.c.blocks, _M.c.tool_calls]
_KEY_COLS += [_M.c.tool_call_id, _M.c.name]
_COMPACTION_COUNTERS = {
    "batch": "compactions",
    "micro": "micro_compactions",
    "native": "native_compactions",
}


_SID: BindParameter[str] = bindparam("p_sid")
_NOW: BindParameter[float] = bindparam("p_now")
_GET = select(_S).where(_S.c.id == _SID)
_LOCK = _GET.with_for_update()
_TOUCH = {"version": _S.c.version + 1, "updated_at": _NOW}
_USAGE = {
    "input_tokens": _S.c.input_tokens + bindparam("p_input"),
    "output_tokens": _S.c.output_tokens + bindparam("p_output"),
    "cache_write_tokens": _S.c.cache_write_tokens + bindparam("p_cache_write"),
    "cache_read_tokens": _S.c.cache_read_tokens + bindparam("p_cache_read"),
    "last_prompt_tokens": bindparam("p_prompt"),
}
_RESERVE = (  # locks the session row and reserves positions [next - p_n, next)
    update(_S)
    .where(_S.c.id == _SID)
    .values(
        next_position=_S.c.next_position + bindparam("p_n"),
        total_messages=_S.c.total_messages + bindparam("p_n"),
        active_messages=_S.c.active_messages + bindparam("p_n"),
        **_TOUCH,
    )
    .returning(_S.c.next_position)
)
_RESERVE_WITH_USAGE = _RESERVE.values(**_USAGE)
_RESERVING = {False: Prepared(_RESERVE), True: Prepared(_RESERVE_WITH_USAGE)}
_RECORD_USAGE = update(_S).where(_S.c.id == _SID).values(**_TOUCH, **_USAGE)
# Meta is not versioned: the agents' version counting covers the transcript and counters only.
_SET_META = update(_S).where(_S.c.id == _SID).values(meta=bindparam("p_meta"), updated_at=_NOW)
_INSERT_MESSAGES = insert(_M)
_INSERT_ONE = Prepared(_INSERT_MESSAGES)
_IDS_AT = select(_M.c.position, _M.c.id).where(
    (_M.c.session_id == _SID) & _M.c.position.between(bindparam("p_lo"), bindparam("p_hi"))
)
# Active rows are the session's top `active_messages` positions: a range on the unique index.
_FIRST_ACTIVE = select(_S.c.next_position - _S.c.active_messages).where(_S.c.id == _SID)
_ACTIVE = (
    (_M.c.session_id == _SID)
    & (_M.c.position >= _FIRST_ACTIVE.scalar_subquery())
    & _M.c.active.is_(True)
)
_LOAD_ACTIVE = select(*_MSG_COLS).where(_ACTIVE).order_by(_M.c.position)
_LOAD_ALL = select(*_MSG_COLS).where(_M.c.session_id == _SID).order_by(_M.c.position)
_ACTIVE_KEYS = select(*_KEY_COLS).where(
    (_M.c.session_id == _SID)
    & _M.c.active.is_(True)
    & _M.c.id.in_(bindparam("p_ids", expanding=True))
)
_RENUMBER = (
    update(_M).where(_M.c.id == bindparam("row_id")).values(position=bindparam("new_position"))
)
_ARCHIVE = (
    update(_M)
    .where((_M.c.session_id == _SID) & _M.c.active.is_(True) & (_M.c.position < bindparam("p_lo")))
    .values(active=False, compacted=bindparam("p_compacted"), archived_by=bindparam("p_by"))
)
_COUNT_COMPACTED = (
    update(_S)
    .where(_S.c.id == _SID)
    .values(
        next_position=bindparam("p_next"),
        active_messages=bindparam("p_active"),
        total_messages=_S.c.total_messages + bindparam("p_n"),
        last_prompt_tokens=0,  # the last reported prompt size described the replaced set
        **_TOUCH,
    )
)
_COUNT_KIND = {
    kind: _COUNT_COMPACTED.values({column: _S.c[column] + 1})
    for kind, column in _COMPACTION_COUNTERS.items()
}


def archive_params(session_id: str, below: int, reason: str) -> dict[str, Any]:
    """`_ARCHIVE`'s parameters: active rows below position `below` leave, for `reason`."""
    return {
        "p_sid": session_id,
        "p_lo": below,
        "p_by": reason,
        "p_compacted": reason == "compaction",
    }


def insert_rows(conn: Connection, session_id: str, rows: list[dict[str, Any]]) -> list[int]:
    """Insert message rows of one session (its lock held); their ids, in order.

    One row, the usual turn step: its id comes with the insert (the driver's last row id on
    SQLite, RETURNING on PostgreSQL), no second statement. Several: one executemany (RETURNING
    would go row by row), then the ids read back by position, unique within the session.
    """
    if len(rows) == 1:
        row_id = _INSERT_ONE.run(conn, rows[0])
        assert row_id is not None
        return [row_id]
    conn.execute(_INSERT_MESSAGES, rows)
    positions = [int(r["position"]) for r in rows]
    bounds = {"p_sid": session_id, "p_lo": min(positions), "p_hi": max(positions)}
    by_position = {int(p): int(i) for p, i in conn.execute(_IDS_AT, bounds)}
    return [by_position[p] for p in positions]


def reserve_positions(
    conn: Connection, session_id: str, n: int, usage: Usage | None, now: float
) -> int | None:
    """Lock the session row and reserve positions [end - n, end): `end`, or None when there
    is no such session. `usage` is added to the totals in the same statement."""
    params = {"p_sid": session_id, "p_n": n, "p_now": now}
    if usage is not None:
        params |= usage_params(usage)
    return _RESERVING[usage is not None].run(conn, params)


def usage_params(usage: Usage) -> dict[str, Any]:
    return {
        "p_input": usage.input_tokens,
        "p_output": usage.output_tokens,
        "p_cache_write": usage.cache_write_tokens,
        "p_cache_read": usage.cache_read_tokens,
        "p_prompt": usage.prompt_tokens,
    }
