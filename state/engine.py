"""Engine setup for the store: SQLite (WAL, foreign keys, BEGIN IMMEDIATE writers) or PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from state.store_errors import StoreError

__all__ = [
    "SQLITE_PRAGMAS",
    "WRITE_OPTION",
    "default_url",
    "describe_database",
    "dialect_of",
    "make_engine",
    "make_sync_sqlite_engine",
]

WRITE_OPTION = "hermes_write"
"""Execution option marking a writing transaction; on SQLite it begins with BEGIN IMMEDIATE."""

SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
    "PRAGMA cache_size=-32768",
)
"""Every SQLite connection's settings (a benchmark's plain sqlite3 floor uses the same)."""
_SUPPORTED = {"sqlite+aiosqlite": "sqlite", "postgresql+asyncpg": "postgresql"}


def default_url(home: Path) -> str:
    """The default store: `sqlite+aiosqlite:///<home>/state.db`."""
    return f"sqlite+aiosqlite:///{Path(home).expanduser().resolve() / 'state.db'}"


def dialect_of(url: str) -> str:
    """`sqlite` or `postgresql` for a supported URL; StoreError names the supported drivers."""
    try:
        driver = make_url(url).drivername
    except Exception as exc:  # sqlalchemy raises ArgumentError for junk
        raise StoreError(f"state.url is not a database URL: {exc}") from exc
    if driver not in _SUPPORTED:
        supported = ", ".join(sorted(_SUPPORTED))
        raise StoreError(f"state.url uses {driver!r}; supported drivers are {supported}")
    return _SUPPORTED[driver]


def describe_database(url: str) -> str:
    """The database as messages name it: the SQLite file, or PostgreSQL's host and database
    (never the password)."""
    parsed = make_url(url)
    if dialect_of(url) == "sqlite":
        return f"the session database {parsed.database or ':memory:'}"
    return f"PostgreSQL at {parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database}"


def make_engine(
    url: str, *, pg_schema: str | None = None, connect_timeout_s: float = 10.0
) -> AsyncEngine:
    """An engine with the store's connection settings; writers use `WRITE_OPTION`."""
    dialect = dialect_of(url)
    if dialect == "sqlite":
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": connect_timeout_s})
        _install_sqlite_hooks(engine.sync_engine)
        return engine
    connect_args: dict[str, Any] = {"timeout": connect_timeout_s, "command_timeout": 60}
    if pg_schema:
        connect_args["server_settings"] = {"search_path": pg_schema}
    return create_async_engine(url, connect_args=connect_args, pool_pre_ping=True)


def make_sync_sqlite_engine(url: str, *, connect_timeout_s: float = 10.0) -> Engine:
    """The same SQLite database through the synchronous pysqlite driver, with the same settings.

    The store runs each operation as one call on its own worker threads over this engine: one
    thread hop per operation instead of several per statement through aiosqlite.
    """
    sync_url = make_url(url).set(drivername="sqlite+pysqlite")
    # Connections move between the store's reader and writer threads, one user at a time.
    connect_args = {"timeout": connect_timeout_s, "check_same_thread": False}
    engine = create_engine(sync_url, connect_args=connect_args)
    _install_sqlite_hooks(engine)
    return engine


def _install_sqlite_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Straight to the driver: through `exec_driver_sql` this one statement cost as much as
        # a whole single-row insert (an execution context, events, a result object).
        writing = conn.get_execution_options().get(WRITE_OPTION, False)
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None  # a connection that begins is open
        cursor = dbapi.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE" if writing else "BEGIN")
        finally:
            cursor.close()
