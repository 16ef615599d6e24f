"""Store fixtures shared by the state and invariant tests: one target per engine, isolated per test."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url

from state import SqlSessionStore
from tests.conftest import pg_url

__all__ = [
    "StoreTarget",
    "fresh_pg_database",
    "shared_db_url",
    "fresh_store_target",
    "open_store",
    "pg_schema",
    "store",
    "store_target",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreTarget:
    """Where a test's store lives: a SQLite file in tmp_path or a fresh PostgreSQL schema."""

    url: str
    pg_schema: str | None = None

    @property
    def dialect(self) -> str:
        return "sqlite" if self.url.startswith("sqlite") else "postgresql"

    async def open(self, **kwargs: Any) -> SqlSessionStore:
        return await SqlSessionStore.open(self.url, pg_schema=self.pg_schema, **kwargs)


async def _connect(url: str) -> asyncpg.Connection:
    u = make_url(url)
    return await asyncpg.connect(
        host=u.host,
        port=u.port,
        user=u.username,
        password=u.password,
        database=u.database,
        timeout=10,
    )


async def _drop_schema(url: str, schema: str) -> None:
    conn = await _connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', timeout=30)
    finally:
        await conn.close(timeout=10)


async def _truncate(url: str, schema: str) -> None:
    conn = await _connect(url)
    try:
        await conn.execute(
            f'TRUNCATE "{schema}".messages, "{schema}".chat_routes, "{schema}".sessions, '
            f'"{schema}".jobs, "{schema}".memory RESTART IDENTITY CASCADE',
            timeout=30,
        )
    finally:
        await conn.close(timeout=10)


@pytest.fixture(scope="session")
def pg_schema() -> Iterator[str | None]:
    """One PostgreSQL schema per test process (unique name, so parallel runs never collide)."""
    url = pg_url()
    if url is None:
        yield None
        return
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield schema
    asyncio.run(_drop_schema(url, schema))


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def store_target(
    request: pytest.FixtureRequest, tmp_path: Path, pg_schema: str | None
) -> AsyncIterator[StoreTarget]:
    """Each store test runs on SQLite and, where HERMES_TEST_PG_URL is set, on PostgreSQL.

    PostgreSQL tests share the process's schema and empty its tables afterwards.
    """
    if request.param == "sqlite":
        yield StoreTarget(url=f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
        return
    url = pg_url()
    if url is None or pg_schema is None:
        pytest.skip("PostgreSQL store tests skipped: HERMES_TEST_PG_URL is not set")
    yield StoreTarget(url=url, pg_schema=pg_schema)
    await _truncate(url, pg_schema)


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def fresh_store_target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreTarget]:
    """Like `store_target`, but PostgreSQL gets a schema of its own (for schema-changing tests)."""
    if request.param == "sqlite":
        yield StoreTarget(url=f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
        return
    url = pg_url()
    if url is None:
        pytest.skip("PostgreSQL store tests skipped: HERMES_TEST_PG_URL is not set")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield StoreTarget(url=url, pg_schema=schema)
    await _drop_schema(url, schema)


@asynccontextmanager
async def fresh_pg_database(url: str) -> AsyncIterator[str]:
    """A new PostgreSQL database on `url`'s server for one test (for processes that take only
    `state.url`), dropped afterwards even if a worker still holds a connection to it."""
    name = f"hermes_{uuid.uuid4().hex[:12]}"
    admin = await _connect(url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"', timeout=30)
    finally:
        await admin.close(timeout=10)
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await _connect(url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', timeout=30)
        finally:
            await admin.close(timeout=10)


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def shared_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """One database that several workers share: a SQLite file, or a fresh PostgreSQL database
    (skipped where HERMES_TEST_PG_URL is not set)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
        return
    url = pg_url()
    if url is None:
        pytest.skip("PostgreSQL worker tests skipped: HERMES_TEST_PG_URL is not set")
    async with fresh_pg_database(url) as fresh:
        yield fresh


@pytest_asyncio.fixture
async def store(store_target: StoreTarget) -> AsyncIterator[SqlSessionStore]:
    s = await store_target.open()
    yield s
    await s.aclose()


@pytest.fixture
def open_store(store_target: StoreTarget) -> Callable[..., Awaitable[SqlSessionStore]]:
    """Open another store on the same database (a second worker)."""
    return store_target.open
