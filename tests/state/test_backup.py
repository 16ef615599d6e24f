"""`backup_sqlite` and `hermes sessions backup`: a consistent copy of a live store.

Contract: sqlite3's online backup API (https://docs.python.org/3/library/sqlite3.html#sqlite3.Connection.backup,
https://www.sqlite.org/backup.html) copies a database that other connections keep writing, as
one consistent snapshot (committed WAL content included).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from agent.messages import user_message
from cli.sessions_cmd import run_backup
from state import SqlSessionStore
from state.backup import backup_sqlite, sqlite_path
from state.store_errors import StoreError


async def _store_with(path: Path, messages: int) -> tuple[SqlSessionStore, str]:
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{path}")
    info = await store.sessions.create_session(platform="cli")
    await store.transcript.append(info.id, [user_message(f"message {n}") for n in range(messages)])
    return store, info.id


async def test_a_backup_of_a_running_store_holds_everything_committed(tmp_path: Path) -> None:
    """While the store is open (WAL mode, rows possibly still in the WAL), the copy holds
    every committed message, passes SQLite's integrity check, and is one file."""
    store, _ = await _store_with(tmp_path / "state.db", 50)
    try:
        result = await asyncio.to_thread(backup_sqlite, tmp_path / "state.db", tmp_path / "b.db")
    finally:
        await store.aclose()
    assert (result.messages, result.sessions) == (50, 1)
    copy = sqlite3.connect(tmp_path / "b.db")
    assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    copy.close()
    assert not (tmp_path / "b.db-wal").exists()


async def test_writers_go_on_during_the_backup(tmp_path: Path) -> None:
    """A writer appending meanwhile is not blocked and the copy is a consistent snapshot
    (some prefix of the writes, never a torn one)."""
    store, session_id = await _store_with(tmp_path / "state.db", 2000)

    async def keep_writing() -> int:
        for n in range(50):
            await store.transcript.append(session_id, [user_message(f"late {n}")])
        return 50

    try:
        backup = asyncio.to_thread(backup_sqlite, tmp_path / "state.db", tmp_path / "b.db")
        result, written = await asyncio.gather(backup, keep_writing())
    finally:
        await store.aclose()
    assert written == 50 and 2000 <= result.messages <= 2050


def test_an_existing_target_is_never_overwritten(tmp_path: Path) -> None:
    """Backing up onto an existing file refuses, and the file is untouched."""
    source = tmp_path / "state.db"
    sqlite3.connect(source).close()
    target = tmp_path / "keep.db"
    target.write_text("precious")
    with pytest.raises(StoreError, match="already exists"):
        backup_sqlite(source, target)
    assert target.read_text() == "precious"


def test_postgresql_stores_are_pointed_to_pg_dump() -> None:
    """A PostgreSQL URL gets the pg_dump advice instead of a copy."""
    with pytest.raises(StoreError, match="pg_dump"):
        sqlite_path("postgresql+asyncpg://postgres@127.0.0.1/hermes")


async def test_the_command_names_the_copy_and_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hermes sessions backup` writes HERMES_HOME/backups/state-<UTC time>.db and says so."""
    store, _ = await _store_with(tmp_path / "state.db", 3)
    await store.aclose()
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    code = await asyncio.to_thread(run_backup, url, tmp_path, None, now=1_767_225_600.0)
    assert code == 0
    expected = tmp_path / "backups" / "state-20260101-000000.db"
    assert expected.exists()
    out = capsys.readouterr().out
    assert str(expected) in out and "1 sessions, 3 messages" in out
