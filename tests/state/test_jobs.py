"""The jobs table: per-owner views, atomic claims across store connections, delivery once.

Runs on SQLite and PostgreSQL (`store_target`). Contracts relied on: PostgreSQL
`SELECT ... FOR UPDATE SKIP LOCKED` skips rows another transaction has locked instead of
waiting ("SKIP LOCKED ... any rows that cannot be immediately locked are skipped", PostgreSQL 15
manual, SELECT, The Locking Clause); SQLite allows one writer at a time, so a conditional
UPDATE's row count says whether this connection changed the row (sqlite.org/lang_update.html,
sqlite3_changes()).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

from sqlalchemy import text

from state import JobSpec, SqlSessionStore
from state.migrations import SCHEMA_VERSION
from tests.state.fixtures import StoreTarget

NOW = 1_800_000_000.0


def spec(owner: str, prompt: str, *, due: float = NOW - 1, platform: str | None = None) -> JobSpec:
    return JobSpec(
        owner=owner,
        target_kind="chat" if platform else "fresh",
        target_platform=platform,
        target_chat="42" if platform else None,
        target_key=f"{platform}:dm:42" if platform else None,
        schedule="every:3600",
        prompt=prompt,
        next_run_at=due,
    )


async def test_an_owner_sees_and_changes_only_their_own_jobs(store: SqlSessionStore) -> None:
    """Bob cannot get, list, update or remove Alice's job; she still has it, unchanged."""
    jobs = store.jobs
    alice = await jobs.create(spec("telegram:1", "alice's secret plan"))
    bob = await jobs.create(spec("telegram:2", "bob's job"))
    assert [j.id for j in await jobs.list_jobs(owner="telegram:2")] == [bob.id]
    assert await jobs.get(alice.id, owner="telegram:2") is None
    assert await jobs.update(alice.id, owner="telegram:2", prompt="hijacked") is None
    assert await jobs.remove(alice.id, owner="telegram:2") is False
    kept = await jobs.get(alice.id, owner="telegram:1")
    assert kept is not None and kept.prompt == "alice's secret plan"
    assert {j.owner for j in await jobs.list_jobs(owner=None)} == {"telegram:1", "telegram:2"}


async def test_odd_text_is_stored_safely(store: SqlSessionStore) -> None:
    """A NUL and a lone surrogate in a prompt are replaced, not refused; emoji survive."""
    job = await store.jobs.create(spec("http:k", "a\x00b\ud800c 🎉"))
    assert job.prompt == "a\ufffdb\ufffdc 🎉"


async def test_concurrent_claims_take_each_due_job_once(
    store: SqlSessionStore, open_store: Callable[..., Awaitable[SqlSessionStore]]
) -> None:
    """Four connections claim at once, again and again: each of 20 due jobs is claimed once;
    a job not yet due and a paused one are never claimed."""
    for i in range(20):
        await store.jobs.create(spec("telegram:1", f"job {i}"))
    later = await store.jobs.create(spec("telegram:1", "later", due=NOW + 600))
    paused = await store.jobs.create(spec("telegram:1", "paused"))
    await store.jobs.update(paused.id, owner=None, paused=True)
    others = [await open_store() for _ in range(3)]
    try:
        workers = [store, *others]

        async def claim(i: int) -> list[int]:
            got: list[int] = []
            for _ in range(8):
                claimed = await workers[i].jobs.claim_due(
                    now=NOW, worker=f"w{i}", lease_s=60, limit=3
                )
                got += [j.id for j in claimed]
            return got

        results = await asyncio.gather(*(claim(i) for i in range(4)))
    finally:
        for other in others:
            await other.aclose()
    counts = Counter(job_id for got in results for job_id in got)
    assert len(counts) == 20 and set(counts.values()) == {1}
    assert later.id not in counts and paused.id not in counts


async def test_an_expired_claim_is_taken_over_and_counted(store: SqlSessionStore) -> None:
    """A claim that runs out (its worker died) goes to another worker as claim 2 of the same
    run; the dead worker can then neither renew, deliver nor finish it."""
    job = await store.jobs.create(spec("telegram:1", "x"))
    first = await store.jobs.claim_due(now=NOW, worker="dead", lease_s=10)
    assert [(j.id, j.claim_count) for j in first] == [(job.id, 1)]
    assert await store.jobs.claim_due(now=NOW + 5, worker="other", lease_s=10) == []
    second = await store.jobs.claim_due(now=NOW + 11, worker="other", lease_s=10)
    assert [(j.claim_count, j.claim_due) for j in second] == [(2, NOW - 1)]
    assert await store.jobs.renew(job.id, worker="dead", until=NOW + 100) is False
    assert await store.jobs.record_delivery(job.id, worker="dead", due=NOW - 1) is False
    assert await store.jobs.finish(job.id, worker="dead", next_run_at=None) is False


async def test_delivery_is_recorded_once_per_run(store: SqlSessionStore) -> None:
    """The first record of a run says send; a second (a redo) says do not; the next run may."""
    job = await store.jobs.create(spec("telegram:1", "x"))
    await store.jobs.claim_due(now=NOW, worker="w", lease_s=10)
    assert await store.jobs.record_delivery(job.id, worker="w", due=NOW - 1) is True
    assert await store.jobs.record_delivery(job.id, worker="w", due=NOW - 1) is False
    assert await store.jobs.finish(job.id, worker="w", next_run_at=NOW + 3600, runs=1)
    await store.jobs.claim_due(now=NOW + 3600, worker="w", lease_s=10)
    assert await store.jobs.record_delivery(job.id, worker="w", due=NOW + 3600) is True
    after = await store.jobs.get(job.id, owner=None)
    assert after is not None and after.claim_count == 1 and after.delivered_due == NOW + 3600


async def test_platform_jobs_wait_for_a_worker_that_can_send(store: SqlSessionStore) -> None:
    """A worker that cannot send to Telegram leaves a Telegram job alone until it is stranded."""
    job = await store.jobs.create(spec("telegram:1", "x", platform="telegram"))
    none = await store.jobs.claim_due(now=NOW, worker="w", lease_s=10, platforms=["discord"])
    assert none == []
    late = await store.jobs.claim_due(
        now=NOW + 120, worker="w", lease_s=10, platforms=["discord"], stranded_after_s=60
    )
    assert [j.id for j in late] == [job.id]


async def test_a_version_6_database_gains_the_jobs_table_on_open(
    fresh_store_target: StoreTarget,
) -> None:
    """A database from before jobs (version 6) is upgraded on open: the table and its index
    exist and jobs can be made and claimed; opening again changes nothing (the step is
    idempotent)."""
    store = await fresh_store_target.open()
    try:
        async with store._engine.begin() as conn:
            await conn.execute(text("DROP TABLE jobs"))
            await conn.execute(text("UPDATE schema_version SET version = 6"))
    finally:
        await store.aclose()
    for _ in range(2):
        store = await fresh_store_target.open()
        try:
            job = await store.jobs.create(spec("terminal:local", "after upgrade"))
            claimed = await store.jobs.claim_due(now=NOW, worker="w", lease_s=5)
            assert [j.id for j in claimed] == [job.id]
            async with store._engine.connect() as conn:
                version = (await conn.execute(text("SELECT version FROM schema_version"))).scalar()
            assert version == SCHEMA_VERSION
        finally:
            await store.aclose()
