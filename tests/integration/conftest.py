"""A fake LLM served from a background thread, for tests that drive the synchronous CLI."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from sim.llm_server import FakeLLM


@contextmanager
def fake_llm_in_thread(**options: Any) -> Iterator[FakeLLM]:
    """`FakeLLM(**options)` on its own event loop thread, so `run_agent.main()` can call
    asyncio.run() in the test's thread; stopped and joined on exit."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: dict[str, asyncio.Event] = {}
    holder: dict[str, FakeLLM] = {}

    async def serve() -> None:
        stop["event"] = asyncio.Event()
        async with FakeLLM(**options) as fake:
            holder["fake"] = fake
            started.set()
            await stop["event"].wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    assert started.wait(10), "fake LLM did not start"
    try:
        yield holder["fake"]
    finally:
        loop.call_soon_threadsafe(stop["event"].set)
        thread.join(10)
        loop.close()


@pytest.fixture
def threaded_llm() -> Iterator[FakeLLM]:
    """FakeLLM on its own event loop thread, so `run_agent.main()` can call asyncio.run()."""
    with fake_llm_in_thread(expected_key="test-key") as fake:
        yield fake
