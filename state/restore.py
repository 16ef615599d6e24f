"""Un-archiving: make a given, ordered list of a session's rows its active set, in one
transaction (undoing a compaction). A mixin of the SQL store.

The active rows are always the session's top positions (`_FIRST_ACTIVE`), so the chosen rows
are renumbered, in the order given, into fresh positions at the top; every other active row is
archived (`active=0, compacted=1`), and a restored row is active again (`compacted=0`). Nothing
is deleted and nothing inserted: the rows are the same rows. A crash mid-way leaves the session
as it was before (the transaction rolls back) or as it is after.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection

from state._connection import StoreConnection
from state.models import MESSAGES, SESSIONS
from state.store_errors import ConcurrentModification, StoreError

__all__ = ["RestoreOps"]

_M, _S = MESSAGES, SESSIONS
_SET_ROW = (
    update(_M)
    .where(_M.c.id == bindparam("row_id"))
    .values(position=bindparam("new_position"), active=True, compacted=False)
)


class RestoreOps(StoreConnection):
    """`restore_active`; `SqlSessionStore` inherits it."""

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
                .values(active=False, compacted=True)
            ).rowcount
            self._fault("restore_active:archived")
            base = int(session.next_position)
            conn.execute(
                _SET_ROW,
                [{"row_id": rid, "new_position": base + i} for i, rid in enumerate(wanted)],
            )
            self._fault("restore_active:renumbered")
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

        return await self._write("restore_active", body)
