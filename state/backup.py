"""A consistent copy of a SQLite store while it runs: sqlite3's online backup API.

`backup_sqlite` copies the database page by page through `sqlite3.Connection.backup`
(https://docs.python.org/3/library/sqlite3.html#sqlite3.Connection.backup, SQLite's
https://www.sqlite.org/backup.html): writers may go on meanwhile, and the copy is one
consistent snapshot including what sits committed in the WAL. The copy is written next to its
target, checked (`PRAGMA integrity_check`), switched out of WAL mode so it is one
self-contained file, and only then renamed into place; an existing file is never overwritten.
PostgreSQL stores are backed up with `pg_dump` (see `PG_DUMP_HINT`).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from state.engine import dialect_of
from state.store_errors import StoreError

__all__ = ["PG_DUMP_HINT", "BackupResult", "backup_sqlite", "sqlite_path"]

PAGES_PER_STEP = 1024
"""Pages copied per step; between steps other connections may write."""
PG_DUMP_HINT = (
    "this store is PostgreSQL: back it up with pg_dump, e.g. "
    "pg_dump --format=custom --file=hermes-$(date +%F).dump 'postgresql://USER@HOST/DB' "
    "(restore with pg_restore --clean --dbname=...)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupResult:
    path: Path
    bytes: int
    messages: int
    sessions: int


def sqlite_path(url: str) -> Path:
    """The database file of a SQLite store URL; StoreError for PostgreSQL or a memory store."""
    if dialect_of(url) != "sqlite":
        raise StoreError(PG_DUMP_HINT)
    database = make_url(url).database
    if not database or database == ":memory:":
        raise StoreError("an in-memory store has nothing to back up")
    return Path(database)


def backup_sqlite(source: Path, target: Path) -> BackupResult:
    """Copy the live database at `source` to `target` (which must not exist yet)."""
    if not source.is_file():
        raise StoreError(f"no session store at {source}")
    if target.exists():
        raise StoreError(f"{target} already exists; choose another name (nothing was written)")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        _copy(source, partial)
        os.replace(partial, target)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"backup of {source} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return _describe(target)


def _copy(source: Path, partial: Path) -> None:
    reader = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        writer = sqlite3.connect(partial)
        try:
            reader.backup(writer, pages=PAGES_PER_STEP)
            writer.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
            verdict = writer.execute("PRAGMA integrity_check").fetchone()
            if verdict is None or verdict[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check of the copy: {verdict}")
        finally:
            writer.close()
    finally:
        reader.close()


def _describe(path: Path) -> BackupResult:
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        messages = connection.execute("SELECT count(*) FROM messages").fetchone()[0]
        sessions = connection.execute("SELECT count(*) FROM sessions").fetchone()[0]
    finally:
        connection.close()
    return BackupResult(
        path=path, bytes=path.stat().st_size, messages=int(messages), sessions=int(sessions)
    )
