"""The standing-instructions ledger of each session: `SqlInstructionLedger` implements
`state.contract.InstructionLedger` (`SqlSessionStore.ledger`).

The ledger keeps a session's standing instructions as rows that are never deleted: an entry is
retired ("superseded", "removed"), so what the user said stays on record. Every method is one
transaction.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from state._connection import StoreConnection
from state.models import INSTRUCTIONS, SESSIONS
from state.store_errors import StoreError
from state.values import Instruction, InstructionKind, InstructionStatus

__all__ = ["SqlInstructionLedger", "copy_instructions"]

_I, _S = INSTRUCTIONS, SESSIONS
_KINDS: frozenset[str] = frozenset({"detected", "pin"})


class SqlInstructionLedger:
    """Ledger reads and writes over one store connection."""

    def __init__(self, conn: StoreConnection) -> None:
        self._conn = conn

    async def list_instructions(
        self, session_id: str, *, include_inactive: bool = False
    ) -> list[Instruction]:
        """The session's ledger, oldest first; retired entries only with `include_inactive`."""
        where = _I.c.session_id == session_id
        if not include_inactive:
            where &= _I.c.status == "active"
        stmt = select(_I).where(where).order_by(_I.c.id)
        return await self._conn._read(
            "list_instructions",
            lambda conn: [_instruction(r._mapping) for r in conn.execute(stmt)],
        )

    async def add_instruction(
        self,
        session_id: str,
        text: str,
        *,
        kind: InstructionKind,
        source_message_id: int | None = None,
        supersedes_id: int | None = None,
    ) -> Instruction:
        """Add one entry; the entry it supersedes (if still active) is retired in the same
        transaction. An empty text or an unknown kind is refused with StoreError."""
        if kind not in _KINDS:
            raise StoreError(f"unknown instruction kind {kind!r}; use detected or pin")
        cleaned = text.replace("\x00", " ").strip()
        if not cleaned:
            raise StoreError("an instruction needs some text")

        def body(conn: Connection) -> Instruction:
            if conn.execute(select(_S.c.id).where(_S.c.id == session_id)).first() is None:
                raise StoreError(f"no session {session_id!r}")
            replaced = None
            if supersedes_id is not None:
                replaced = _retire(conn, session_id, supersedes_id, "superseded")
            values = {
                "session_id": session_id,
                "text": cleaned,
                "kind": kind,
                "source_message_id": source_message_id,
                "supersedes_id": replaced,
                "status": "active",
                "created_at": time.time(),
            }
            new_id = conn.execute(insert(_I).values(**values).returning(_I.c.id)).scalar_one()
            return _instruction({**values, "id": new_id})

        return await self._conn._write("add_instruction", body)

    async def remove_instruction(self, session_id: str, instruction_id: int) -> bool:
        """Retire an active entry ("removed"); False when the session has no such entry."""

        def body(conn: Connection) -> bool:
            return _retire(conn, session_id, instruction_id, "removed") is not None

        return await self._conn._write("remove_instruction", body)


def copy_instructions(conn: Connection, source_session_id: str, target_session_id: str) -> None:
    """Carry the active ledger into a child session (legacy rotating compaction)."""
    rows = conn.execute(
        select(_I).where((_I.c.session_id == source_session_id) & (_I.c.status == "active"))
    ).all()
    now = time.time()
    for row in rows:
        conn.execute(
            insert(_I).values(
                session_id=target_session_id,
                text=row.text,
                kind=row.kind,
                source_message_id=row.source_message_id,
                supersedes_id=None,
                status="active",
                created_at=now,
            )
        )


def _retire(conn: Connection, session_id: str, instruction_id: int, status: str) -> int | None:
    """Mark one active entry of the session retired; its id, or None when there was none."""
    result = conn.execute(
        update(_I)
        .where(
            (_I.c.id == int(instruction_id))
            & (_I.c.session_id == session_id)
            & (_I.c.status == "active")
        )
        .values(status=status)
    )
    return int(instruction_id) if result.rowcount else None


def _instruction(row: Mapping[Any, Any]) -> Instruction:
    status: InstructionStatus = "removed"
    if row["status"] in ("active", "superseded"):
        status = "active" if row["status"] == "active" else "superseded"
    return Instruction(
        id=int(row["id"]),
        session_id=row["session_id"],
        text=row["text"],
        kind="pin" if row["kind"] == "pin" else "detected",
        source_message_id=_int(row["source_message_id"]),
        supersedes_id=_int(row["supersedes_id"]),
        status=status,
        created_at=float(row["created_at"]),
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
