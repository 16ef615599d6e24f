"""Schema versions: a fresh database is created, an older one upgraded, a newer one refused."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection

from agent.errors import StoreError
from agent.messages import system_message, user_message
from state.migrations import SCHEMA_VERSION, WIDENED_TO_ID, MigrationPlan, plan_migration
from state.models import Base
from tests.state.fixtures import StoreTarget


@pytest.mark.parametrize(
    ("found", "supported", "plan"),
    [
        (None, 2, MigrationPlan(create=True, steps=())),
        (2, 2, MigrationPlan(create=False, steps=())),
        (1, 2, MigrationPlan(create=False, steps=(2,))),
        (1, 4, MigrationPlan(create=False, steps=(2, 3, 4))),
    ],
)
def test_plan_migration(found: int | None, supported: int, plan: MigrationPlan) -> None:
    """The plan creates a missing schema and runs every upgrade after the found version."""
    assert plan_migration(found, supported) == plan


@pytest.mark.parametrize(("found", "message"), [(3, "version 3.*up to version 2"), (0, "invalid")])
def test_plan_migration_refuses(found: int, message: str) -> None:
    """A newer or nonsense version is refused with both versions named."""
    with pytest.raises(StoreError, match=message):
        plan_migration(found, 2)


async def _index_names(target: StoreTarget) -> set[str]:
    store = await target.open()
    try:
        async with store._engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                sql = "SELECT name FROM sqlite_master WHERE type = 'index'"
            else:
                sql = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
            return {r[0] for r in await conn.execute(text(sql))}
    finally:
        await store.aclose()


async def _execute(target: StoreTarget, *statements: str) -> None:
    store = await target.open()
    try:
        async with store._engine.begin() as conn:
            for sql in statements:
                await conn.execute(text(sql))
    finally:
        await store.aclose()


async def test_older_database_is_upgraded_on_open(fresh_store_target: StoreTarget) -> None:
    """A version-1 database (without the v2 index and the v3 lease table) gains both and is
    stamped current; the upgraded lease table works."""
    await _execute(
        fresh_store_target,
        "DROP INDEX ix_sessions_platform_updated",
        "DROP TABLE leases",
        "UPDATE schema_version SET version = 1",
    )
    store = await fresh_store_target.open()
    try:
        async with store._engine.connect() as conn:
            version = (await conn.execute(text("SELECT version FROM schema_version"))).scalar()
        assert version == SCHEMA_VERSION
        async with store.locks.lock_session("s1", timeout_s=0):
            pass
    finally:
        await store.aclose()
    assert "ix_sessions_platform_updated" in await _index_names(fresh_store_target)


async def test_newer_database_is_refused_untouched(fresh_store_target: StoreTarget) -> None:
    """Opening a database from a newer program fails clearly and changes nothing."""
    await _execute(fresh_store_target, f"UPDATE schema_version SET version = {SCHEMA_VERSION + 5}")
    with pytest.raises(StoreError, match=f"version {SCHEMA_VERSION + 5}.*up to version"):
        await fresh_store_target.open()
    with pytest.raises(StoreError):
        await fresh_store_target.open()


async def test_unsupported_url_is_a_clear_error() -> None:
    """A URL with a driver the store does not support names the supported ones."""
    with pytest.raises(StoreError, match="postgresql\\+asyncpg"):
        await StoreTarget(url="mysql+aiomysql://u@localhost/db").open()


def _schema_drift(conn: Connection) -> list[object]:
    """What Alembic's comparer finds between the live schema and the models (search DDL apart:
    the FTS5 tables and the tsvector column are created by DDL hooks, not declared)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    def declared(obj: object, name: str | None, kind: str, reflected: bool, _: object) -> bool:
        return not (name or "").startswith(("messages_fts", "memory_fts")) and name not in (
            "tsv",
            "ix_messages_tsv",
            "ix_memory_tsv",
        )

    context = MigrationContext.configure(conn, opts={"include_object": declared})
    return list(compare_metadata(context, Base.metadata))


async def test_every_upgrade_path_matches_the_models(fresh_store_target: StoreTarget) -> None:
    """A fresh database and one upgraded from version 1 both equal the declared models, as
    Alembic's autogenerate comparer sees them (our migration steps are checked, not trusted)."""
    store = await fresh_store_target.open()
    try:
        async with store._engine.connect() as conn:
            assert await conn.run_sync(_schema_drift) == []
    finally:
        await store.aclose()
    narrow = [  # PostgreSQL enforces widths: a version-1 database has the old ones
        f"ALTER TABLE {table} ALTER COLUMN {column} TYPE VARCHAR(255)"
        for table, column in WIDENED_TO_ID
        if fresh_store_target.dialect == "postgresql"
    ]
    await _execute(
        fresh_store_target,
        "DROP INDEX ix_sessions_platform_updated",
        "DROP TABLE leases",
        "DROP TABLE instructions",
        *(["DROP TABLE memory_fts"] if fresh_store_target.dialect == "sqlite" else []),
        "DROP TABLE memory",
        "DROP INDEX ix_sessions_lineage_head",
        "ALTER TABLE sessions DROP COLUMN lineage_head",
        "DROP INDEX ix_sessions_owner_updated",
        "ALTER TABLE sessions DROP COLUMN owner",
        "ALTER TABLE messages DROP COLUMN archived_by",
        *narrow,
        "UPDATE schema_version SET version = 1",
    )
    store = await fresh_store_target.open()
    try:
        async with store._engine.connect() as conn:
            assert await conn.run_sync(_schema_drift) == []
    finally:
        await store.aclose()


async def test_a_version_10_database_learns_why_rows_were_archived(
    fresh_store_target: StoreTarget,
) -> None:
    """v11 adds `messages.archived_by` to a populated version-10 database: the rows archived
    before it (all flagged compacted then) say "compaction", active rows say nothing; the step
    run again changes nothing, and the store then records /undo as its own reason."""
    store = await fresh_store_target.open()
    try:
        info = await store.sessions.create_session(platform="cli", model="m")
        said = [user_message(f"message {n}") for n in range(4)]
        await store.transcript.append(info.id, [system_message("sys"), *said])
        active = await store.transcript.load_active(info.id)
        await store.transcript.archive_and_compact(info.id, [active[0], *active[3:]], kind="batch")
    finally:
        await store.aclose()
    for run in range(2):  # the step is idempotent: a second run over a v11 table changes nothing
        drop = ["ALTER TABLE messages DROP COLUMN archived_by"] if run == 0 else []
        await _execute(fresh_store_target, *drop, "UPDATE schema_version SET version = 10")
        store = await fresh_store_target.open()
        try:
            rows = await store.transcript.show(info.id, include_archived=True)
        finally:
            await store.aclose()
        reasons = [(m["content"], m.get("_active"), m.get("_archived_by")) for m in rows]
        assert reasons == [
            ("message 0", False, "compaction"),
            ("message 1", False, "compaction"),
            ("sys", True, None),
            ("message 2", True, None),
            ("message 3", True, None),
        ]
    store = await fresh_store_target.open()
    try:
        active = await store.transcript.load_active(info.id)
        await store.transcript.archive_and_compact(info.id, active[:-1], archived_by="undo")
        rows = await store.transcript.show(info.id, include_archived=True)
    finally:
        await store.aclose()
    undone = [m for m in rows if m.get("_archived_by") == "undo"]
    assert [m["content"] for m in undone] == ["message 3"]
    assert undone[0].get("_compacted") is False  # taken back, not compacted
