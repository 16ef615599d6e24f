"""SQLite operations run on the store's worker threads: cancellation, queueing and timeouts."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from agent.errors import StoreError
from agent.messages import user_message
from agent.providers.base import Usage
from state import SqlSessionStore


@dataclass
class Gate:
    """A fault hook that holds the writer thread at one step until released (or raises there)."""

    step: str
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    fail: bool = False

    def __call__(self, step: str) -> None:
        if step != self.step or self.entered.is_set():
            return
        self.entered.set()
        if not self.release.wait(10):
            raise RuntimeError("gate never released")
        if self.fail:
            raise RuntimeError("aborted by the test")

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 10), "the operation never started"


@pytest_asyncio.fixture
async def gated(tmp_path: Path) -> AsyncIterator[tuple[SqlSessionStore, Gate, str]]:
    gate = Gate(step="append:inserted")
    store = await SqlSessionStore.open(
        f"sqlite+aiosqlite:///{tmp_path / 'state.db'}", fault_hook=gate, op_timeout_s=5
    )
    session_id = (await store.sessions.create_session()).id
    yield store, gate, session_id
    gate.release.set()
    await store.aclose()


async def _contents(store: SqlSessionStore, session_id: str) -> list[str]:
    return [m["content"] for m in await store.transcript.load_active(session_id)]


async def test_cancelled_append_that_commits_is_stamped(
    gated: tuple[SqlSessionStore, Gate, str],
) -> None:
    """A task cancelled while its append runs waits for the commit: when the cancellation
    reaches the caller, the message is stored and stamped (memory matches the store)."""
    store, gate, sid = gated
    msg = user_message("kept")
    task = asyncio.create_task(store.transcript.append(sid, [msg]))
    await gate.wait_entered()
    task.cancel()
    await asyncio.sleep(0)  # the cancellation is delivered; the task now waits for the outcome
    assert not task.done()
    gate.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert msg["_persisted"] is True  # stamped before the cancellation went on
    rows = await store.transcript.load_active(sid)
    assert [m["content"] for m in rows] == ["kept"]
    assert msg["_persisted"] is True and msg["_id"] == rows[0]["_id"]


async def test_cancelled_append_that_fails_leaves_nothing(
    gated: tuple[SqlSessionStore, Gate, str],
) -> None:
    """A cancelled append whose transaction then fails rolls back whole and stays unstamped."""
    store, gate, sid = gated
    gate.fail = True
    msg = user_message("lost")
    task = asyncio.create_task(store.transcript.append(sid, [msg]))
    await gate.wait_entered()
    task.cancel()
    gate.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _contents(store, sid) == []
    info = await store.sessions.get_session(sid)
    assert info is not None and (info.total_messages, info.active_messages) == (0, 0)
    assert "_persisted" not in msg and "_id" not in msg


async def test_cancelled_queued_append_never_runs(gated: tuple[SqlSessionStore, Gate, str]) -> None:
    """An append cancelled while waiting behind another write is dropped from the queue."""
    store, gate, sid = gated
    first, second = user_message("first"), user_message("second")
    running = asyncio.create_task(store.transcript.append(sid, [first]))
    await gate.wait_entered()
    queued = asyncio.create_task(store.transcript.append(sid, [second]))
    await asyncio.sleep(0)  # one loop turn: the task submits its job, then awaits it
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    gate.release.set()
    assert await running == 1
    await store.meta.update_meta(sid, after=True)
    assert await _contents(store, sid) == ["first"]
    assert "_persisted" not in second


async def test_timed_out_queued_write_is_dropped(tmp_path: Path) -> None:
    """A write that times out waiting in the queue raises StoreError and is never applied."""
    gate = Gate(step="append:inserted")
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    async with await SqlSessionStore.open(url) as setup:  # no short deadline for the setup
        sid = (await setup.sessions.create_session()).id
    store = await SqlSessionStore.open(url, fault_hook=gate, op_timeout_s=1.0)
    try:
        running = asyncio.create_task(store.transcript.append(sid, [user_message("slow")]))
        await gate.wait_entered()
        with pytest.raises(StoreError, match="update_meta timed out"):
            await store.meta.update_meta(sid, late=True)
        gate.release.set()
        with pytest.raises(StoreError, match="append timed out"):
            await running  # it commits on its own after its caller gave up
        # The writer thread is a queue: a write submitted now runs after that commit.
        await store.meta.record_usage(sid, Usage())
        assert await store.meta.get_meta(sid) == {}
        assert await _contents(store, sid) == ["slow"]
    finally:
        gate.release.set()
        await store.aclose()


async def test_operation_after_close_is_a_store_error(tmp_path: Path) -> None:
    """Using a closed SQLite store raises StoreError instead of hanging."""
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    sid = (await store.sessions.create_session()).id
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.sessions.get_session(sid)


async def test_concurrent_appends_keep_order_and_ids(tmp_path: Path) -> None:
    """Many concurrent appends to one session each get distinct ids and positions."""
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    try:
        sid = (await store.sessions.create_session()).id
        msgs = [user_message(f"m{i}") for i in range(50)]
        counts = await asyncio.gather(*(store.transcript.append(sid, [m]) for m in msgs))
        assert counts == [1] * 50
        rows = await store.transcript.load_active(sid)
        assert sorted(m["content"] for m in rows) == sorted(m["content"] for m in msgs)
        assert sorted(m["_id"] for m in msgs) == sorted(m["_id"] for m in rows)
    finally:
        await store.aclose()
