"""Turn locks and leadership across processes: two stores on one database stand for two workers.

Contract (PostgreSQL manual, "Advisory Locks" and `lock_timeout`): a session-level advisory lock
is held until unlocked or until its connection ends; a waiter on `pg_advisory_lock` is granted
the lock as soon as it is free, and `lock_timeout` ends the wait with SQLSTATE 55P03. On SQLite
the same contract comes from lease rows with an expiry that the holder renews.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest
from sqlalchemy import insert
from sqlalchemy.engine import make_url

from agent.errors import SessionBusy
from state import SqlSessionStore
from state._pg_locks import advisory_key
from state.locks import HeldLease
from state.models import LEASES
from tests.state.fixtures import StoreTarget
from tests.waits import WAIT_S


async def _pair(target: StoreTarget, *, ttl_s: float = 10.0) -> tuple[SqlSessionStore, ...]:
    a = await target.open(lease_ttl_s=ttl_s)
    b = await target.open(lease_ttl_s=ttl_s)
    return a, b


async def _cancel_when(ready: asyncio.Event, task: asyncio.Task[None]) -> None:
    """Wait until `ready`, cancel `task`, and see it end cancelled."""
    async with asyncio.timeout(WAIT_S):
        await ready.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_held_session_lock_is_busy_for_another_worker(store_target: StoreTarget) -> None:
    """While one worker holds a session's lock, another cannot take it; after release it can."""
    a, b = await _pair(store_target)
    try:
        async with a.locks.lock_session("s1", timeout_s=1) as lease:
            assert not lease.waited
            with pytest.raises(SessionBusy, match="session:s1"):
                async with b.locks.lock_session("s1", timeout_s=0):
                    pass
            async with b.locks.lock_session("other", timeout_s=0):
                pass  # other sessions are independent
        async with b.locks.lock_session("s1", timeout_s=0) as lease:
            assert not lease.waited
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_waiter_is_told_once_and_gets_the_lock_on_release(
    store_target: StoreTarget,
) -> None:
    """A worker that must wait hears `on_wait` once and holds the lock right after release."""
    a, b = await _pair(store_target)
    told: list[float] = []
    told_event = asyncio.Event()

    async def on_wait() -> None:
        told.append(time.monotonic())
        told_event.set()

    async def second() -> bool:
        async with b.locks.lock_session("s1", timeout_s=WAIT_S, on_wait=on_wait) as lease:
            return lease.waited

    try:
        async with a.locks.lock_session("s1", timeout_s=1):
            waiter = asyncio.create_task(second())
            async with asyncio.timeout(WAIT_S):
                await told_event.wait()
            assert not waiter.done()
        async with asyncio.timeout(WAIT_S):
            assert await waiter is True
        assert len(told) == 1
    finally:
        await a.aclose()
        await b.aclose()


async def test_waiting_is_bounded(store_target: StoreTarget) -> None:
    """A wait longer than the bound ends in SessionBusy, saying how long it waited."""
    a, b = await _pair(store_target)
    try:
        async with a.locks.lock_session("s1", timeout_s=1):
            started = time.monotonic()
            with pytest.raises(SessionBusy) as caught:
                async with b.locks.lock_session("s1", timeout_s=0.3):
                    pass
            assert 0.25 <= time.monotonic() - started < WAIT_S
            assert caught.value.waited_s >= 0.25
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_cancelled_holder_releases_the_lock(store_target: StoreTarget) -> None:
    """Cancelling the task that holds the lock releases it."""
    a, b = await _pair(store_target)
    held = asyncio.Event()

    async def hold_forever() -> None:
        async with a.locks.lock_session("s1", timeout_s=1):
            held.set()
            await asyncio.Event().wait()

    try:
        await _cancel_when(held, asyncio.create_task(hold_forever()))
        async with b.locks.lock_session("s1", timeout_s=WAIT_S):
            pass
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_cancelled_waiter_leaves_no_lock_behind(store_target: StoreTarget) -> None:
    """A waiter cancelled mid-wait holds nothing afterwards: a third worker takes the lock."""
    a, b = await _pair(store_target)
    c = await store_target.open()
    waiting = asyncio.Event()

    async def on_wait() -> None:
        waiting.set()

    async def wait_for_it() -> None:
        async with b.locks.lock_session("s1", timeout_s=WAIT_S, on_wait=on_wait):
            raise AssertionError("the waiter must not get the lock")

    try:
        async with a.locks.lock_session("s1", timeout_s=1):
            await _cancel_when(waiting, asyncio.create_task(wait_for_it()))
        async with c.locks.lock_session("s1", timeout_s=WAIT_S):
            pass
    finally:
        for s in (a, b, c):
            await s.aclose()


async def test_tasks_of_one_worker_exclude_each_other(store_target: StoreTarget) -> None:
    """Two tasks of one process never share the lock (advisory locks would be re-entrant)."""
    store = await store_target.open()
    order: list[str] = []
    inside = asyncio.Event()

    async def first() -> None:
        async with store.locks.lock_session("s1", timeout_s=1):
            order.append("first in")
            inside.set()
            await asyncio.sleep(0)
            order.append("first out")

    async def second() -> None:
        await inside.wait()
        async with store.locks.lock_session("s1", timeout_s=WAIT_S):
            order.append("second in")

    try:
        async with asyncio.timeout(WAIT_S):
            await asyncio.gather(first(), second())
        assert order == ["first in", "first out", "second in"]
        with pytest.raises(SessionBusy):
            async with store.locks.lock_session("s1", timeout_s=1):
                async with store.locks.lock_session("s1", timeout_s=0):
                    pass
    finally:
        await store.aclose()


async def _die_holding(target: StoreTarget, name: str, ttl_s: float) -> asyncpg.Connection | None:
    """Take `name` the way a worker would, then "crash" (the holder never releases it)."""
    if target.dialect == "sqlite":
        store = await target.open()
        async with store._engine.begin() as conn:
            await conn.execute(
                insert(LEASES).values(name=name, holder="dead", expires_at=time.time() + ttl_s)
            )
        await store.aclose()
        return None
    u = make_url(target.url)
    conn = await asyncpg.connect(
        host=u.host, port=u.port, user=u.username, database=u.database, timeout=10
    )
    namespace = f"{u.database}/{target.pg_schema or 'public'}"
    await conn.execute("SELECT pg_advisory_lock($1)", advisory_key(namespace, name))
    return conn


async def test_a_crashed_holder_frees_the_lock(store_target: StoreTarget) -> None:
    """A holder that dies without releasing: PostgreSQL frees the lock with its connection; a
    SQLite lease is free once its expiry passes. The waiter gets it within its bound."""
    dead = await _die_holding(store_target, "session:s1", ttl_s=0.5)
    store = await store_target.open(lease_ttl_s=0.5)
    try:
        with pytest.raises(SessionBusy):
            async with store.locks.lock_session("s1", timeout_s=0):
                pass
        if dead is not None:
            asyncio.get_running_loop().call_later(0.2, dead.terminate)
        started = time.monotonic()
        async with store.locks.lock_session("s1", timeout_s=WAIT_S) as lease:
            assert lease.waited
        assert time.monotonic() - started < 2.0
    finally:
        await store.aclose()


async def test_leadership_goes_to_one_worker_and_passes_on_release(
    store_target: StoreTarget,
) -> None:
    """`lead` is granted to one worker at a time; the next one is granted when it steps down."""
    a, b = await _pair(store_target, ttl_s=1.0)
    order: list[str] = []
    following = asyncio.Event()

    async def on_wait() -> None:
        following.set()

    async def follow() -> None:
        async with b.locks.lead("telegram", on_wait=on_wait) as lease:
            order.append(f"b leads (waited={lease.waited})")

    try:
        async with a.locks.lead("telegram") as lease_a:
            order.append("a leads")
            follower = asyncio.create_task(follow())
            async with asyncio.timeout(WAIT_S):
                await following.wait()
            assert not lease_a.is_lost()
            order.append("a steps down")
        async with asyncio.timeout(WAIT_S):
            await follower
        assert order == ["a leads", "a steps down", "b leads (waited=True)"]
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_leader_learns_it_lost_the_lock(store_target: StoreTarget) -> None:
    """A leader whose lock is gone (connection killed; lease taken over after expiry) is told."""
    store = await store_target.open(lease_ttl_s=0.6)
    try:
        async with store.locks.lead("discord") as lease:
            await _take_away(store, store_target, lease)
            async with asyncio.timeout(WAIT_S):
                await lease.wait_lost()
            assert lease.is_lost()
    finally:
        await store.aclose()


async def _take_away(store: SqlSessionStore, target: StoreTarget, lease: HeldLease) -> None:
    if target.dialect == "sqlite":
        async with store._engine.begin() as conn:
            await conn.execute(LEASES.update().values(holder="usurper"))
        return
    assert isinstance(lease.token, asyncpg.Connection)
    pid = lease.token.get_server_pid()
    u = make_url(target.url)
    admin = await asyncpg.connect(
        host=u.host, port=u.port, user=u.username, database=u.database, timeout=10
    )
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
