"""Per-session counters and the meta record: usage totals, compaction counts, free-form meta.

`SqlMetaStore` implements `state.contract.MetaStore` (`SqlSessionStore.meta`). Usage and
compaction counts move the session's version (they are writes to its counters); meta writes do
not. The agent reads the meta record through `agent.session_meta`. Every method is one
transaction.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Update, update
from sqlalchemy.engine import Connection

from state._connection import StoreConnection
from state._statements import (
    _COMPACTION_COUNTERS,
    _RECORD_USAGE,
    _S,
    _SET_META,
    _SID,
    _TOUCH,
    usage_params,
)
from state.catalog import locked_session, session_info
from state.contract import CompactionKind
from state.store_errors import StoreError
from state.values import Usage

__all__ = ["SqlMetaStore"]


class SqlMetaStore:
    """Counters and meta of sessions over one store connection."""

    def __init__(self, conn: StoreConnection) -> None:
        self._conn = conn

    async def _update_session(
        self, op: str, session_id: str, stmt: Update, params: dict[str, Any]
    ) -> None:
        def body(conn: Connection) -> None:
            bound = {**params, "p_sid": session_id, "p_now": time.time()}
            if conn.execute(stmt, bound).rowcount == 0:
                raise StoreError(f"no session {session_id!r}")

        await self._conn._write(op, body)

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
        info = await self._conn._read("get_session", lambda conn: session_info(conn, session_id))
        if info is None:
            raise StoreError(f"no session {session_id!r}")
        return info.meta

    async def update_meta(self, session_id: str, **changes: Any) -> None:
        """Merge `changes` into the session's meta dict; a value of None removes the key."""

        def body(conn: Connection) -> None:
            meta = dict(locked_session(conn, session_id)["meta"] or {})
            for key, value in changes.items():
                if value is None:
                    meta.pop(key, None)
                else:
                    meta[key] = value
            conn.execute(_SET_META, {"p_sid": session_id, "p_meta": meta, "p_now": time.time()})

        await self._conn._write("update_meta", body)
