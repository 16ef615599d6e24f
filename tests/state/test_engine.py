"""Engine settings: the default URL, SQLite PRAGMAs and writer transactions."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from agent.errors import StoreError
from state import SqlSessionStore, default_url
from state.engine import dialect_of


def test_default_url_is_state_db_in_home(tmp_path: Path) -> None:
    """The default store is an aiosqlite file called state.db in HERMES_HOME."""
    assert default_url(tmp_path) == f"sqlite+aiosqlite:///{tmp_path.resolve()}/state.db"


@pytest.mark.parametrize(
    ("url", "dialect"),
    [
        ("sqlite+aiosqlite:///x.db", "sqlite"),
        ("postgresql+asyncpg://u@h/db", "postgresql"),
    ],
)
def test_dialect_of_supported_urls(url: str, dialect: str) -> None:
    """The two supported drivers map to their dialects."""
    assert dialect_of(url) == dialect


@pytest.mark.parametrize("url", ["sqlite:///x.db", "postgresql://u@h/db", "not a url"])
def test_dialect_of_refuses_other_urls(url: str) -> None:
    """Sync drivers and junk are refused with a StoreError."""
    with pytest.raises(StoreError):
        dialect_of(url)


async def test_sqlite_pragmas_are_applied(hermes_home: Path) -> None:
    """Every SQLite connection runs WAL, synchronous NORMAL, foreign keys and a busy timeout."""
    store = await SqlSessionStore.open(default_url(hermes_home))
    try:
        async with store._engine.connect() as conn:
            values = [
                (await conn.execute(text(f"PRAGMA {name}"))).scalar()
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            ]
        assert values == ["wal", 1, 1, 5000]
        assert (hermes_home / "state.db").exists()
    finally:
        await store.aclose()
