"""Jobs made in a chat fire through the runner and reach that chat: real python-telegram-bot
against the fake Bot API, a real Runtime on FakeLLM and SQLite, the scheduler on an injected
clock (ticks are called by the test, so "20 minutes later" takes no time).

Bot API contract relied on (core.telegram.org/bots/api#sendmessage): the bot's messages arrive
by `sendMessage` to the chat id; a private chat's id is the user's id. Alice (1001) and Bob
(1002) are both allowed; 1003 was allowed once and is not any more.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.access import Principal
from agent.jobs.manage import SILENCE_MARKER
from agent.messages import ToolCall
from agent.tools.registry import ToolContext
from gateway.metrics import JobRun, Sample
from gateway.run import GatewayRunner
from gateway.scheduler import JobScheduler
from sim.llm_server import FakeLLM, Turn
from state import JobSpec
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import free_port, make_config, request_texts, start_runtime
from tests.gateway.platform_drivers import TelegramDriver, wait_until
from tests.integration.workers import hermes_command, worker_env

ALICE, BOB = TelegramDriver.IDS["alice"], TelegramDriver.IDS["bob"]
MINUTE = 60.0


class Clock:
    """Wall time plus an offset the test moves forward."""

    def __init__(self) -> None:
        import time

        self._time = time.time
        self.offset = 0.0

    def __call__(self) -> float:
        return self._time() + self.offset


class Recorder:
    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def record(self, sample: Sample) -> None:
        self.samples.append(sample)

    def job_outcomes(self) -> list[str]:
        return [s.outcome for s in self.samples if isinstance(s, JobRun)]


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


Gateway = Callable[..., Any]


@pytest.fixture
def gateway(
    telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Gateway:
    """`async with gateway(**sections) as (runner, scheduler, clock, metrics)`."""
    driver = TelegramDriver(telegram)

    @asynccontextmanager
    async def running(**sections: Any) -> AsyncIterator[tuple[Any, ...]]:
        gw = driver.gateway_config()
        gw["telegram"]["allowed_users"] = [str(ALICE), str(BOB)]
        config = make_config(llm, tmp_path / "state.db", gateway=gw, **sections)
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime, [driver.adapter()])
            clock, metrics = Clock(), Recorder()
            scheduler = JobScheduler(
                runner, runtime.store.jobs, config, clock=clock, metrics=metrics
            )
            await runner.start()
            try:
                yield runner, scheduler, clock, metrics
            finally:
                await scheduler.stop(timeout_s=5)
                await runner.stop()

    return running


def shown(telegram: FakeTelegram, chat: int) -> list[str]:
    """What a chat shows: each bot message as last edited."""
    final = {m.message_id: m.text for m in telegram.sent if m.chat_id == chat}
    for chat_id, message_id, text in telegram.edits:
        if chat_id == chat:
            final[message_id] = text
    return [final[k] for k in sorted(final)]


async def say(telegram: FakeTelegram, user: int, text: str, expect: str) -> str:
    """`user` sends `text` in their private chat; returns the bot's answer containing `expect`."""
    before = len(shown(telegram, user))
    await telegram.push_text(user, user, text)
    await wait_until(
        lambda: any(expect in t for t in shown(telegram, user)[before:]), what=f"reply to {text}"
    )
    return next(t for t in shown(telegram, user)[before:] if expect in t)


async def fire(scheduler: JobScheduler) -> int:
    claimed = await scheduler.tick()
    await scheduler.wait_idle()
    return claimed


def job_prompts(llm: FakeLLM) -> list[str]:
    """The last user text of every chat request that was a job run."""
    texts = [request_texts(r.json)[-1] for r in llm.requests if r.json]
    return [t for t in texts if t.startswith("[Scheduled run")]


async def test_remind_is_delivered_to_that_chat_once_at_its_time(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """`/remind in 20m call the bank`: nothing fires before 20 minutes; after, the model is
    asked once and Alice's chat gets its reply, sent by the adapter; Bob's gets nothing; a
    later tick fires nothing more (a one-shot is done)."""
    async with gateway() as (runner, scheduler, clock, metrics):
        answer = await say(telegram, ALICE, "/remind in 20m call the bank", "Reminder #")
        assert "set for" in answer
        clock.offset = 19 * MINUTE
        assert await fire(scheduler) == 0
        llm.script(Turn(text="⏰ Time to call the bank!"))
        clock.offset = 20 * MINUTE + 1
        assert await fire(scheduler) == 1
        await wait_until(
            lambda: "⏰ Time to call the bank!" in shown(telegram, ALICE), what="the reminder"
        )
        clock.offset = 3 * 60 * MINUTE
        assert await fire(scheduler) == 0
        (job,) = await runner.source.store.jobs.list_jobs(owner=f"telegram:{ALICE}")
    assert [p.endswith("Remind the user: call the bank") for p in job_prompts(llm)] == [True]
    assert shown(telegram, ALICE).count("⏰ Time to call the bank!") == 1
    assert shown(telegram, BOB) == []
    assert (job.next_run_at, job.last_outcome, job.runs) == (None, "ok", 1)
    assert metrics.job_outcomes() == ["ok"]


async def test_a_silent_reply_sends_nothing(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """A run whose reply is only the silence marker sends no message; the run is counted."""
    async with gateway() as (runner, scheduler, clock, metrics):
        await say(telegram, ALICE, "/remind every 1h check the build", "Reminder #")
        before = list(shown(telegram, ALICE))
        llm.script(Turn(text=SILENCE_MARKER))
        clock.offset = 60 * MINUTE + 1
        assert await fire(scheduler) == 1
        llm.script(Turn(text="The build is red."))
        clock.offset = 120 * MINUTE + 1
        assert await fire(scheduler) == 1
        await wait_until(lambda: "The build is red." in shown(telegram, ALICE), what="2nd run")
    assert shown(telegram, ALICE) == [*before, "The build is red."]
    assert metrics.job_outcomes() == ["silent", "ok"]
    assert SILENCE_MARKER in job_prompts(llm)[0]  # the preamble defines the marker


async def test_a_failing_job_tells_its_owner_and_cron_list_shows_the_error(
    gateway: Gateway, telegram: FakeTelegram, tmp_path: Path
) -> None:
    """The model endpoint is dead: the run fails, Alice is told in one line in her chat, the
    job retries with backoff, and `hermes cron list --json` shows the error."""
    dead = f"http://127.0.0.1:{free_port()}"
    model = {"base_url": dead, "provider": "anthropic", "api_key": "k", "default": "test-model",
             "context_length": 100_000, "max_retries": 0, "timeout_s": 3.0}  # fmt: skip
    async with gateway(model=model) as (runner, scheduler, clock, metrics):
        await say(telegram, ALICE, "/remind in 5m water the plants", "Reminder #")
        clock.offset = 5 * MINUTE + 1
        assert await fire(scheduler) == 1
        await wait_until(
            lambda: any(t.startswith("⚠️ Job #1") for t in shown(telegram, ALICE)),
            what="the failure notice",
        )
        (job,) = await runner.source.store.jobs.list_jobs(owner=None)
    notice = next(t for t in shown(telegram, ALICE) if t.startswith("⚠️ Job #1"))
    assert "water the plants" in notice and "retrying at" in notice and "\n" not in notice
    assert job.last_outcome == "failed" and job.failures == 1 and job.next_run_at is not None
    (tmp_path / "config.yaml").write_text(
        json.dumps({"state": {"url": f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"}})
    )
    cli = await asyncio.create_subprocess_exec(
        *hermes_command(), "cron", "list", "--json",
        env=worker_env(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await cli.communicate()
    assert cli.returncode == 0, err.decode()
    (row,) = json.loads(out)
    assert row["last_outcome"] == "failed" and row["last_error"] == job.last_error
    assert "unavailable" in row["last_error"].lower() or "connect" in row["last_error"].lower()


async def test_two_people_never_reach_each_others_jobs(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """Bob's /jobs does not list Alice's job; he cannot cancel, pause or run it; his schedule
    tool neither lists nor cancels it; its output goes to Alice's chat only."""
    async with gateway(tools={"enabled": ["schedule"]}) as (runner, scheduler, clock, _):
        await say(telegram, ALICE, "/remind in 10m alice-secret-errand", "Reminder #1")
        bob_list = await say(telegram, BOB, "/jobs", "jobs")
        for action in ("cancel", "pause", "run"):
            refused = await say(telegram, BOB, f"/jobs {action} 1", "#1")
            assert "no job #1" in refused
        tool = runner.source.deps.tools
        ctx = ToolContext(
            session_id="x",
            principal=Principal(platform="telegram", id=str(BOB), tools=frozenset({"schedule"})),
            services={"jobs": runner.source.store.jobs, "store": runner.store},
        )
        listed = await tool.run(_call("schedule", {"action": "list"}), ctx)
        cancelled = await tool.run(_call("schedule", {"action": "cancel", "job_id": 1}), ctx)
        llm.script(Turn(text="alice-secret-output"))
        clock.offset = 10 * MINUTE + 1
        assert await fire(scheduler) == 1
        await wait_until(lambda: "alice-secret-output" in shown(telegram, ALICE), what="output")
        (job,) = await runner.source.store.jobs.list_jobs(owner=None)
    assert "alice-secret" not in bob_list and "no jobs" in bob_list
    assert "alice-secret" not in listed and listed == "The user has no scheduled jobs."
    assert cancelled == "The user has no job #1."
    assert not any("alice-secret" in t for t in shown(telegram, BOB))
    assert job.owner == f"telegram:{ALICE}" and not job.paused and job.runs == 1


async def test_a_revoked_users_job_does_not_run(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """A job whose owner is no longer allowed is paused with the reason; the model is never
    asked and nothing is sent."""
    async with gateway() as (runner, scheduler, clock, metrics):
        await runner.source.store.jobs.create(
            JobSpec(owner="telegram:1003", target_kind="chat", target_platform="telegram",
                    target_chat="1003", target_key="telegram:dm:1003", schedule="every:3600",
                    prompt="leak something", next_run_at=clock() - 1)
        )  # fmt: skip
        assert await fire(scheduler) == 1
        (job,) = await runner.source.store.jobs.list_jobs(owner=None)
    assert job.paused and "no longer allowed" in (job.last_error or "")
    assert job_prompts(llm) == [] and [m for m in telegram.sent if m.chat_id == 1003] == []
    assert metrics.job_outcomes() == ["skipped"]


async def test_a_job_run_cannot_make_jobs_unless_allowed(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """A run's turn is not offered the schedule tool (schedule.allow_from_jobs is off); the
    owner's own turns are."""
    async with gateway(tools={"enabled": ["schedule"]}) as (runner, scheduler, clock, _):
        await say(telegram, ALICE, "/remind in 1m x", "Reminder #")
        await say(telegram, ALICE, "hello", "echo")
        clock.offset = 2 * MINUTE
        assert await fire(scheduler) == 1
    offered = [
        [t.get("name") for t in (r.json or {}).get("tools") or ()]
        for r in llm.requests
        if r.json and request_texts(r.json)
    ]
    assert offered == [["schedule"], []]


async def test_heartbeat_fires_only_when_the_chat_was_idle(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """`/heartbeat every 30m`: a tick while the chat talked within 30 minutes is skipped (and
    the next try moves to 30 minutes after that talk); an idle chat gets one check-in even
    after several missed ticks (coalesced)."""
    async with gateway() as (runner, scheduler, clock, metrics):
        answer = await say(telegram, ALICE, "/heartbeat every 30m how is the deploy?", "💓")
        assert "heartbeat" in answer
        await say(telegram, ALICE, "still here", "echo")
        (beat,) = await runner.source.store.jobs.list_jobs(owner=None)
        await runner.source.store.jobs.update(beat.id, owner=None, next_run_at=clock())  # due now
        assert await fire(scheduler) == 1  # the chat talked a moment ago: not idle
        (skipped,) = await runner.source.store.jobs.list_jobs(owner=None)
        session = await runner.store.sessions.get_session(
            (
                await runner.store.sessions.get_or_create_for_chat(
                    "telegram", f"telegram:dm:{ALICE}"
                )
            ).id
        )
        llm.script(Turn(text="Deploy looks fine."))
        clock.offset = 5 * 60 * MINUTE  # hours later: ten ticks missed, one check-in
        assert await fire(scheduler) == 1
        await wait_until(lambda: "Deploy looks fine." in shown(telegram, ALICE), what="beat")
        assert await fire(scheduler) == 0
        off = await say(telegram, ALICE, "/heartbeat off", "Heartbeat off")
    assert off == "Heartbeat off."
    assert skipped.last_outcome == "skipped" and skipped.last_error == "chat active"
    assert session is not None and skipped.next_run_at == session.updated_at + 30 * MINUTE
    assert metrics.job_outcomes() == ["skipped", "ok"]
    assert len(job_prompts(llm)) == 1


def _call(name: str, args: dict[str, Any]) -> ToolCall:
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _hourly(due: float, *, catch_up: str = "once", quiet: str | None = None) -> JobSpec:
    return JobSpec(
        owner="terminal:local",
        target_kind="fresh",
        schedule="every:3600",
        prompt="hourly-check",
        next_run_at=due,
        catch_up=catch_up,
        quiet_hours=quiet,
    )


@pytest.mark.parametrize(("policy", "runs"), [("once", 1), ("all", 4), ("skip", 0)])
async def test_after_downtime_each_catch_up_policy_fires_what_it_says(
    gateway: Gateway, llm: FakeLLM, policy: str, runs: int
) -> None:
    """An hourly job last due 3 h 10 min ago (four runs missed while no worker was up): `once`
    fires one run, `all` fires all four (one per tick), `skip` none; each then waits for its
    next run ahead."""
    async with gateway() as (runner, scheduler, clock, metrics):
        jobs = runner.source.store.jobs
        job = await jobs.create(_hourly(clock() - 3 * 3600 - 600, catch_up=policy))
        for _ in range(6):
            await fire(scheduler)
        after = await jobs.get(job.id, owner=None)
    assert after is not None and after.next_run_at is not None
    assert after.next_run_at > clock() and after.next_run_at - clock() < 3600
    assert len(job_prompts(llm)) == runs and after.runs == runs
    assert metrics.job_outcomes() == (["missed"] if policy == "skip" else ["stored"] * runs)


async def test_quiet_hours_skip_a_run(gateway: Gateway, llm: FakeLLM) -> None:
    """A run due inside its quiet hours (UTC here) is skipped: the model is not asked, and the
    next run is the first one after the window."""
    async with gateway() as (runner, scheduler, clock, metrics):
        now = datetime.fromtimestamp(clock(), UTC)
        window = f"{(now - timedelta(hours=1)):%H:%M}-{(now + timedelta(hours=2)):%H:%M}"
        jobs = runner.source.store.jobs
        job = await jobs.create(_hourly(clock() - 1, quiet=window))
        assert await fire(scheduler) == 1
        after = await jobs.get(job.id, owner=None)
    assert job_prompts(llm) == [] and metrics.job_outcomes() == ["skipped"]
    assert after is not None and after.last_error == "quiet hours"
    assert after.next_run_at is not None and after.next_run_at >= clock() + 2 * 3600 - 120


async def test_a_heartbeats_own_turn_does_not_count_as_the_chat_talking(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """On the real clock: a heartbeat that last ran after the chat's last message fires when
    due again, and again right after (its own turn is not activity); once Alice talks, it
    waits for her to be quiet for its interval."""
    async with gateway() as (runner, scheduler, clock, metrics):
        jobs = runner.source.store.jobs
        await say(telegram, ALICE, "hello first", "echo")
        beat = await jobs.create(
            JobSpec(owner=f"telegram:{ALICE}", kind="heartbeat", target_kind="chat",
                    target_platform="telegram", target_chat=str(ALICE),
                    target_key=f"telegram:dm:{ALICE}", schedule="every:60",
                    prompt="any news?", next_run_at=clock() - 1)
        )  # fmt: skip
        # A beat ran after Alice's message (as if at its previous interval).
        await jobs.claim_due(now=clock(), worker="earlier", lease_s=5)
        await jobs.finish(beat.id, worker="earlier", last_run_at=clock(), next_run_at=clock())
        assert await fire(scheduler) == 1
        await jobs.update(beat.id, owner=None, next_run_at=clock())
        assert await fire(scheduler) == 1
        await say(telegram, ALICE, "I am here", "echo")
        await jobs.update(beat.id, owner=None, next_run_at=clock())
        assert await fire(scheduler) == 1
    assert metrics.job_outcomes() == ["ok", "ok", "skipped"]
    assert len(job_prompts(llm)) == 2


async def test_a_run_whose_workers_died_twice_is_given_up_and_told(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """Two workers claimed the same run and died (their claims expired): the third claim does
    not run it a third time; Alice is told in one line and the job goes on to its next run."""
    async with gateway() as (runner, scheduler, clock, metrics):
        await say(telegram, ALICE, "/remind every 1h stretch", "Reminder #1")
        jobs = runner.source.store.jobs
        (job,) = await jobs.list_jobs(owner=None)
        due = job.next_run_at
        assert due is not None
        for dead in ("dead-1", "dead-2"):
            assert await jobs.claim_due(now=due + 1, worker=dead, lease_s=-1) != []
        clock.offset = due + 2 - clock()
        assert await fire(scheduler) == 1
        await wait_until(
            lambda: any("given up" in t for t in shown(telegram, ALICE)), what="the notice"
        )
        (after,) = await jobs.list_jobs(owner=None)
    assert job_prompts(llm) == [] and metrics.job_outcomes() == ["failed"]
    assert after.claim_count == 3 and after.next_run_at == due + 3600
    assert after.last_error is not None and "two workers stopped" in after.last_error
