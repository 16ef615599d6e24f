"""Fixtures for gateway tests: a FakeLLM and a config pointing a runtime at it and a SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sim.llm_server import FakeLLM


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    """A running fake LLM (echoes unless scripted)."""
    async with FakeLLM() as fake:
        yield fake


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The session store's SQLite file for this test."""
    return tmp_path / "state.db"
