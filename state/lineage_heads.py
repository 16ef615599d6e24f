"""Stateless HTTP conversations' heads: a mixin of the SQL store.

A stateless client resends its whole conversation; the HTTP API recognises the stored session it
continues by a hash of that history (`gateway.http.lineage`), kept in `sessions.lineage_head`
(schema v6, indexed). Taking a head is atomic: of two requests that extend one head at once,
one gets the session and the other gets None (and starts a branch), so no two turns ever claim
to continue the same stored history. Heads never move the session's version (they describe the
client's view, not the stored messages).
"""

from __future__ import annotations

import time

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter

from state._connection import StoreConnection
from state._statements import _S, _SID

__all__ = ["LineageOps"]

_HEAD: BindParameter[str] = bindparam("p_head")
_FIND = (
    select(_S.c.id)
    .where((_S.c.lineage_head == _HEAD) & _S.c.end_reason.is_(None))
    .order_by(_S.c.updated_at.desc())
    .limit(1)
)
_FIND_OWNED = _FIND.where(_S.c.owner == bindparam("p_owner"))
_TAKE = (
    update(_S)
    .where((_S.c.id == _SID) & (_S.c.lineage_head == _HEAD))
    .values(lineage_head=bindparam("p_claim"), updated_at=bindparam("p_now"))
)
_SET = update(_S).where(_S.c.id == _SID).values(lineage_head=bindparam("p_claim"))
_CLEAR = (
    update(_S).where((_S.c.id == _SID) & _S.c.lineage_head.is_not(None)).values(lineage_head=None)
)


class LineageOps(StoreConnection):
    """`take_lineage` / `set_lineage`; `SqlSessionStore` inherits them."""

    async def take_lineage(self, head: str, claim: str, *, owner: str | None = None) -> str | None:
        """The open session whose head is `head`, its head replaced by `claim` in the same
        transaction; None when no session has it (or another request took it first). With
        `owner`, only that owner's sessions count: another key that replays the same history
        finds nothing (and starts its own session)."""
        find = _FIND if owner is None else _FIND_OWNED
        wanted = {"p_head": head} if owner is None else {"p_head": head, "p_owner": owner}

        def body(conn: Connection) -> str | None:
            found = conn.execute(find, wanted).scalar_one_or_none()
            if found is None:
                return None
            params = {"p_sid": found, "p_head": head, "p_claim": claim, "p_now": time.time()}
            return found if conn.execute(_TAKE, params).rowcount == 1 else None

        return await self._write("take_lineage", body)

    async def set_lineage(self, session_id: str, head: str | None) -> None:
        """Make `head` the session's head (None: no stateless request continues it)."""

        def body(conn: Connection) -> None:
            if head is None:
                conn.execute(_CLEAR, {"p_sid": session_id})
            else:
                conn.execute(_SET, {"p_sid": session_id, "p_claim": head})

        await self._write("set_lineage", body)
