"""Versioned schema migrations, applied on open: create fresh, upgrade older, refuse newer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog
from sqlalchemy import bindparam, inspect, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from state.engine import WRITE_OPTION
from state.models import (
    INSTRUCTIONS,
    JOBS,
    LEASES,
    LINEAGE_HEAD_CHARS,
    MEDIA,
    MEMORY,
    MESSAGES,
    SCHEMA_VERSION_TABLE,
    SESSIONS,
    Base,
    SchemaVersionRow,
)
from state.owners import LOCAL_OWNER, legacy_owner
from state.store_errors import StoreError
from state.values import MAX_ID_CHARS

__all__ = ["SCHEMA_VERSION", "MigrationPlan", "apply_migrations", "plan_migration"]

log = structlog.get_logger(__name__)

Step = Callable[[Connection], None]


def _v2_list_index(conn: Connection) -> None:
    """v2: an index for listing sessions by platform; room in PostgreSQL pages for HOT archiving."""
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_sessions_platform_updated ON sessions (platform, updated_at)"
    )
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("ALTER TABLE messages SET (fillfactor = 50)")


def _v3_leases(conn: Connection) -> None:
    """v3: the lease table (SQLite's cross-process session locks and poller elections)."""
    LEASES.create(conn, checkfirst=True)


def _v4_instructions(conn: Connection) -> None:
    """v4: the standing-instructions ledger, one row per entry (declared as `InstructionRow`)."""
    INSTRUCTIONS.create(conn, checkfirst=True)


WIDENED_TO_ID = (
    ("sessions", "chat_key"),
    ("sessions", "user_id"),
    ("chat_routes", "chat_key"),
    ("messages", "tool_call_id"),
    ("messages", "name"),
)
"""Columns that were VARCHAR(255) until v5 and are VARCHAR(MAX_ID_CHARS) since."""


def _v5_wider_ids(conn: Connection) -> None:
    """v5: ids from HTTP clients (the `user` field, tool call ids) longer than 255 characters.
    PostgreSQL widens a VARCHAR without rewriting the table; SQLite never enforced the width."""
    if conn.dialect.name != "postgresql":
        return
    for table, column in WIDENED_TO_ID:
        conn.exec_driver_sql(
            f"ALTER TABLE {table} ALTER COLUMN {column} TYPE VARCHAR({MAX_ID_CHARS})"
        )


def _v6_lineage_head(conn: Connection) -> None:
    """v6: `sessions.lineage_head`, indexed: which session a stateless HTTP request continues."""
    if "lineage_head" not in {c["name"] for c in inspect(conn).get_columns("sessions")}:
        conn.exec_driver_sql(
            f"ALTER TABLE sessions ADD COLUMN lineage_head VARCHAR({LINEAGE_HEAD_CHARS})"
        )
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_sessions_lineage_head ON sessions (lineage_head)"
    )


def _v7_session_owners(conn: Connection) -> None:
    """v7: `sessions.owner`, indexed, each existing row given the owner its route implies
    (`state.owners.legacy_owner`): a chat user's direct chat theirs, a group's the chat's,
    HTTP sessions the admin key's, the terminal's and the rest the machine owner's."""
    if "owner" not in {c["name"] for c in inspect(conn).get_columns("sessions")}:
        conn.exec_driver_sql(
            f"ALTER TABLE sessions ADD COLUMN owner VARCHAR({MAX_ID_CHARS}) "
            f"NOT NULL DEFAULT '{LOCAL_OWNER}'"
        )
    rows = conn.execute(
        select(SESSIONS.c.id, SESSIONS.c.platform, SESSIONS.c.chat_key, SESSIONS.c.user_id)
    ).all()
    changes = [
        {"p_id": r.id, "p_owner": owner}
        for r in rows
        if (owner := legacy_owner(r.platform, r.chat_key, r.user_id)) != LOCAL_OWNER
    ]
    if changes:
        stmt = (
            update(SESSIONS)
            .where(SESSIONS.c.id == bindparam("p_id"))
            .values(owner=bindparam("p_owner"))
        )
        conn.execute(stmt, changes)
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_sessions_owner_updated ON sessions (owner, updated_at)"
    )


def _v8_jobs(conn: Connection) -> None:
    """v8: scheduled jobs, reminders and heartbeats (declared as `JobRow`)."""
    JOBS.create(conn, checkfirst=True)


def _v9_memory(conn: Connection) -> None:
    """v9: what Hermes remembers about each person (`MemoryRow`), with its full-text index
    (the table's `after_create` DDL; checkfirst makes a second run a no-op)."""
    MEMORY.create(conn, checkfirst=True)


def _v10_media(conn: Connection) -> None:
    """v10: the media table (declared as `MediaRow`): who owns which stored file."""
    MEDIA.create(conn, checkfirst=True)


def _v11_archived_by(conn: Connection) -> None:
    """v11: `messages.archived_by`, why a row left the active set (a compaction, `/retry`,
    `/undo`, ...). Rows archived before it were all flagged compacted, so they say
    "compaction": an older `/retry` or `/undo` cannot be told apart from one."""
    if "archived_by" not in {c["name"] for c in inspect(conn).get_columns("messages")}:
        conn.exec_driver_sql("ALTER TABLE messages ADD COLUMN archived_by VARCHAR(16)")
    conn.execute(
        update(MESSAGES)
        .where(MESSAGES.c.active.is_(False) & MESSAGES.c.archived_by.is_(None))
        .values(archived_by="compaction")
    )


UPGRADES: dict[int, Step] = {
    2: _v2_list_index,
    3: _v3_leases,
    4: _v4_instructions,
    5: _v5_wider_ids,
    6: _v6_lineage_head,
    7: _v7_session_owners,
    8: _v8_jobs,
    9: _v9_memory,
    10: _v10_media,
    11: _v11_archived_by,
}
"""`UPGRADES[n]` takes a database from version n-1 to n. Version 1 is the first release."""
SCHEMA_VERSION = max(UPGRADES)


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationPlan:
    create: bool
    steps: tuple[int, ...]


def plan_migration(found: int | None, supported: int = SCHEMA_VERSION) -> MigrationPlan:
    """What to do with a database at version `found` (None: no schema yet)."""
    if found is None:
        return MigrationPlan(create=True, steps=())
    if found > supported:
        raise StoreError(
            f"the session database has schema version {found}, but this program supports "
            f"up to version {supported}; upgrade hermes (the database was not changed)"
        )
    if found < 1:
        raise StoreError(f"the session database has an invalid schema version {found}")
    return MigrationPlan(create=False, steps=tuple(range(found + 1, supported + 1)))


async def apply_migrations(engine: AsyncEngine) -> tuple[int | None, int]:
    """Bring the schema to SCHEMA_VERSION in one transaction; returns (found, now)."""
    writer = engine.execution_options(**{WRITE_OPTION: True})
    async with writer.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(current_schema()))"))
        found = await conn.run_sync(_found_version)
        plan = plan_migration(found)
        if plan.create:
            await conn.run_sync(Base.metadata.create_all)
            await conn.execute(SCHEMA_VERSION_TABLE.insert().values(id=1, version=0))
        for number in plan.steps:
            await conn.run_sync(UPGRADES[number])
        if plan.create or plan.steps:
            await conn.execute(SCHEMA_VERSION_TABLE.update().values(version=SCHEMA_VERSION))
            log.info("store_migrated", found=found, version=SCHEMA_VERSION)
    return found, SCHEMA_VERSION


def _found_version(conn: Connection) -> int | None:
    if not inspect(conn).has_table(SchemaVersionRow.__tablename__):
        return None
    version = conn.execute(select(SchemaVersionRow.version)).scalar()
    return None if version is None else int(version)
