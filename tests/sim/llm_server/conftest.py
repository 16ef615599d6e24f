"""Fixtures for the fake model server's own tests: a fresh FakeLLM per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sim.llm_server import FakeLLM


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server
