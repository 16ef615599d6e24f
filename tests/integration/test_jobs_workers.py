"""Two real `hermes gateway run` workers on one store fire every due job exactly once.

On a fresh PostgreSQL database (HERMES_TEST_PG_URL; skipped without it) and on one SQLite
file: 20 jobs come due at once while both workers tick; each fires once (the fake model sees
each prompt once; each Telegram chat gets one message). Then the worker running a job is
killed with SIGKILL mid-run: the other worker redoes it once (its claim expired) and the chat
gets one message. Both workers poll Telegram through the election, so chat jobs run on the
one that can send (Bot API: one getUpdates consumer, any process may sendMessage).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sim.llm_server import FakeLLM, Turn
from state import JobInfo, JobSpec, SqlSessionStore
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import free_port
from tests.integration.workers import Worker, running_workers, worker_config
from tests.state.fixtures import shared_db_url
from tests.waits import SLOW_WAIT_S

__all__ = ["shared_db_url"]

LEASE_TTL_S = 1.5
JOB_LEASE_S = 3.0
SLOW = "slow-job-victim"
USERS = [str(200 + i) for i in range(10)]


class _Responder:
    """Echo; the first request carrying SLOW hangs (its worker is killed meanwhile)."""

    def __init__(self) -> None:
        self.slow_seen = 0

    def __call__(self, body: dict[str, Any], api: str) -> Turn | None:
        if SLOW in json.dumps(body.get("messages") or []):
            self.slow_seen += 1
            if self.slow_seen == 1:
                return Turn(text="never delivered", delay_s=120)
            return Turn(text=f"done: {SLOW}")
        return None


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(responder=_Responder()) as fake:
        yield fake


def _configs(llm: FakeLLM, db_url: str, telegram: FakeTelegram) -> list[dict[str, Any]]:
    return [
        worker_config(
            llm_url=llm.openai_base_url,
            db_url=db_url,
            port=free_port(),
            lease_ttl_s=LEASE_TTL_S,
            gateway={
                "telegram": {
                    "enabled": True,
                    "token": telegram.token,
                    "base_url": f"http://127.0.0.1:{telegram.port}/w{i}/bot",
                    "allowed_users": USERS,
                }
            },
            schedule={"tick_s": 0.3, "lease_s": JOB_LEASE_S},
        )
        for i in range(2)
    ]


def _chat_job(user: str, prompt: str, due: float) -> JobSpec:
    return JobSpec(
        owner=f"telegram:{user}",
        kind="reminder",
        target_kind="chat",
        target_platform="telegram",
        target_chat=user,
        target_key=f"telegram:dm:{user}",
        schedule=f"once:{due}",
        prompt=prompt,
        next_run_at=due,
    )


def _fresh_job(prompt: str, due: float) -> JobSpec:
    return JobSpec(
        owner="terminal:local",
        target_kind="fresh",
        schedule=f"once:{due}",
        prompt=prompt,
        next_run_at=due,
    )


async def _create(db_url: str, specs: list[JobSpec]) -> None:
    async with await SqlSessionStore.open(db_url) as store:
        for spec in specs:
            await store.jobs.create(spec)


async def _wait_done(db_url: str, count: int) -> list[JobInfo]:
    """Until `count` jobs have run and none is claimed; fails after 3 * SLOW_WAIT_S with their state."""
    async with await SqlSessionStore.open(db_url) as store:
        jobs: list[JobInfo] = []
        try:
            async with asyncio.timeout(3 * SLOW_WAIT_S):
                while True:
                    jobs = await store.jobs.list_jobs(owner=None)
                    if len(jobs) == count and all(
                        j.runs >= 1 and j.claimed_by is None for j in jobs
                    ):
                        return jobs
                    await asyncio.sleep(0.2)
        except TimeoutError:
            state = [(j.id, j.runs, j.last_outcome, j.last_error, j.claimed_by) for j in jobs]
            raise AssertionError(f"jobs not done: {state}") from None


def _prompt_counts(llm: FakeLLM) -> Counter[str]:
    """How many model requests carried each job's prompt as their newest user message."""
    seen: Counter[str] = Counter()
    for request in llm.requests:
        messages = (request.json or {}).get("messages") or []
        users = [m for m in messages if m.get("role") == "user"]
        if users and isinstance(users[-1].get("content"), str):
            last = users[-1]["content"]
            if last.startswith("[Scheduled run"):
                seen[last.rsplit("\n", 1)[-1]] += 1
    return seen


async def test_twenty_due_jobs_fire_once_each_across_two_workers(
    shared_db_url: str, llm: FakeLLM, tmp_path: Path
) -> None:
    """20 jobs due at once (10 to Telegram chats, 10 to fresh sessions), two workers ticking
    every 0.3 s: every prompt reaches the model once, every chat gets exactly one message, and
    every job ran once."""
    async with FakeTelegram() as telegram:
        configs = _configs(llm, shared_db_url, telegram)
        async with running_workers(tmp_path, configs) as workers:
            await _users_start_the_bot(telegram, USERS)
            greeted = len(telegram.sent)
            now = time.time()
            specs = [_chat_job(u, f"chat-job-{u}", now - 1) for u in USERS]
            specs += [_fresh_job(f"fresh-job-{i:02d}", now - 1) for i in range(10)]
            await _create(shared_db_url, specs)
            jobs = await _wait_done(shared_db_url, 20)
            await _settle(telegram, workers)
    counts = _prompt_counts(llm)
    asked = [f"Remind the user: {s.prompt}" if s.kind == "reminder" else s.prompt for s in specs]
    assert {p: counts[p] for p in asked} == {p: 1 for p in asked}
    per_chat = Counter(str(m.chat_id) for m in telegram.sent[greeted:])
    assert {u: per_chat[u] for u in USERS} == {u: 1 for u in USERS}
    assert sorted((j.runs, j.next_run_at, j.claim_count) for j in jobs) == [(1, None, 1)] * 20
    outcomes = Counter(j.last_outcome for j in jobs)
    assert outcomes == {"ok": 10, "stored": 10}


async def test_a_job_whose_worker_is_killed_mid_run_is_redone_once_and_sent_once(
    shared_db_url: str, llm: FakeLLM, tmp_path: Path
) -> None:
    """SIGKILL the worker running a Telegram job while the model is answering it: the other
    worker becomes the poller, claims the run once its claim expires, runs it again (the
    model sees the prompt twice) and the chat gets exactly one message."""
    async with FakeTelegram() as telegram:
        configs = _configs(llm, shared_db_url, telegram)
        async with running_workers(tmp_path, configs) as workers:
            await _users_start_the_bot(telegram, USERS[:1])
            greeted = len(telegram.sent)
            await _create(shared_db_url, [_chat_job(USERS[0], SLOW, time.time() - 1)])
            async with asyncio.timeout(30):
                while not _prompt_counts(llm):
                    await llm.wait_requests(len(llm.requests) + 1, timeout=30)
            victim = await _runner_of_job(shared_db_url, workers)
            await victim.kill()
            (job,) = await _wait_done(shared_db_url, 1)
            survivor = workers[1 - victim.index]
            await _settle(telegram, [survivor])
    assert _prompt_counts(llm)[f"Remind the user: {SLOW}"] == 2
    sent = [m.text for m in telegram.sent[greeted:] if str(m.chat_id) == USERS[0]]
    assert sent == [f"done: {SLOW}"]
    assert (job.runs, job.claim_count, job.last_outcome) == (1, 2, "ok")
    assert job.claimed_by is None and job.delivered_due == job.claim_due


async def _users_start_the_bot(telegram: FakeTelegram, users: list[str]) -> None:
    """Each user writes to the bot first (a bot cannot open a chat: Bot API 403/400 "chat not
    found"), and is answered."""
    await telegram.wait_for(lambda: len(telegram.poll_consumers) >= 1, 30)
    for user in users:
        await telegram.push_text(int(user), int(user), "hi")
    await telegram.wait_for(lambda: set(users) <= {str(m.chat_id) for m in telegram.sent}, 60)


async def _runner_of_job(db_url: str, workers: list[Worker]) -> Worker:
    """The worker whose claim the (only) job carries (`host:pid:random`)."""
    async with await SqlSessionStore.open(db_url) as store:
        (job,) = await store.jobs.list_jobs(owner=None)
    assert job.claimed_by is not None
    pid = int(job.claimed_by.split(":")[1])
    (worker,) = [w for w in workers if w.proc is not None and w.proc.pid == pid]
    return worker


async def _settle(telegram: FakeTelegram, workers: list[Worker]) -> None:
    """Give a late duplicate the time to show up: two more ticks of every worker."""
    await asyncio.sleep(1.0)
    for worker in workers:
        assert worker.proc is not None and worker.proc.returncode is None, worker.output()
