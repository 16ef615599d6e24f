"""Fixtures of the store tests (defined in tests/state/fixtures.py, shared with tests/invariants)."""

from __future__ import annotations

from typing import Any

from tests.conftest import pg_url
from tests.state.fixtures import fresh_store_target, open_store, pg_schema, store, store_target

__all__ = ["fresh_store_target", "open_store", "pg_schema", "store", "store_target"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say why the PostgreSQL half of the store suite did not run."""
    if pg_url() is None:
        terminalreporter.write_line(
            "PostgreSQL store tests skipped: HERMES_TEST_PG_URL is not set "
            "(e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test)"
        )
