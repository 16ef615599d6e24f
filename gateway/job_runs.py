"""One run of a claimed job: decide, take a turn as its owner, deliver once, record the result.

The decision comes first and is pure (`agent.jobs.schedule.plan_run`: on time, missed, quiet
hours). A run is an ordinary turn through the runner, as the job's owner resolved from config
now (a revoked user's job does not run; nobody can approve, so risky tools are refused, and the
`schedule` tool is withheld unless `schedule.allow_from_jobs`). The reply goes to the target
chat through its adapter, or stays in the session (the turn stored it) when no chat can be
reached; a reply that is only the silence marker sends nothing. Delivery is recorded in the
job's row before the send, so a run redone after a crash never sends twice. A failure is told
to the owner in one line where the job delivers, and the run is retried with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import structlog

from agent.access import Principal, TurnAccess
from agent.config import HermesConfig
from agent.errors import HermesError
from agent.jobs.manage import chat_of_key, is_silent, run_prompt
from agent.jobs.schedule import (
    MAX_ATTEMPTS,
    Every,
    format_local,
    next_after,
    parse_quiet_hours,
    parse_schedule,
    plan_run,
    retry_delay_s,
    zone_named,
)
from agent.turn_options import TurnOptions
from gateway.election import ElectedAdapter
from gateway.metrics import JobOutcome
from gateway.platforms.base import ChatRef, InboundMessage, PlatformName
from gateway.principals import principal_for_owner
from gateway.reply import WholeReplySink
from gateway.run import GatewayRunner, TurnOutcome
from state import JobInfo, ReadScope, SqlJobStore, chat_owner

__all__ = ["JobRunner", "RunResult"]

log = structlog.get_logger(__name__)

JOBS_PLATFORM = "jobs"
"""The `sessions.platform` of a job's own fresh sessions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """What one claimed run came to."""

    job_id: int
    due: float
    outcome: JobOutcome
    reply: str = ""
    error: str | None = None
    sent: bool = False
    """A message reached the chat (the reply, or the one-line failure notice)."""
    next_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Where:
    """Where a run happens and where its words go."""

    session_id: str
    chat: ChatRef | None
    """The chat to send to; None: the reply stays in the session."""
    owner: str
    """The session's owner: the job's owner, or the group chat the job was made in (whose
    sessions only its tools may read: docs/privacy.md)."""


class JobRunner:
    """Runs claimed jobs for one worker (`gateway.scheduler.JobScheduler` claims them)."""

    def __init__(
        self,
        runner: GatewayRunner,
        jobs: SqlJobStore,
        config: HermesConfig,
        *,
        worker: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._runner = runner
        self._jobs = jobs
        self._config = config
        self._worker = worker
        self._clock = clock

    async def run(self, job: JobInfo) -> RunResult | None:
        now = self._clock()
        due = job.claim_due if job.claim_due is not None else now
        zone = zone_named(job.timezone)
        schedule = parse_schedule(job.schedule)
        if job.claim_count > 2:  # claimed, died, claimed again, died again: give this run up
            following = next_after(schedule, now, zone, phase=due)
            error = "two workers stopped while running it; this run was given up"
            where = await self._where(job) if job.target_kind != "fresh" else None
            return await self._failed(job, due, error, following, now, give_up=True, where=where)
        if job.delivered_due == due:  # a worker delivered it and died before recording that
            following = next_after(schedule, now, zone, phase=due)
            return await self._done(job, due, "redone", following, now, reply="", sent=True)
        quiet = parse_quiet_hours(job.quiet_hours) if job.quiet_hours else None
        plan = plan_run(schedule, due=due, now=now, zone=zone, catch_up=_catch_up(job), quiet=quiet)
        if not plan.fire:
            outcome: JobOutcome = "missed" if plan.reason == "missed" else "skipped"
            return await self._done(job, due, outcome, plan.next_at, now, error=plan.reason)
        principal = principal_for_owner(job.owner, self._config)
        if principal is None:
            error = f"{job.owner} is no longer allowed to use this assistant; the job is paused"
            await self._jobs.finish(
                job.id, worker=self._worker, paused=True, last_outcome="skipped", last_error=error
            )
            log.warning("job_owner_revoked", job_id=job.id)
            return RunResult(job_id=job.id, due=due, outcome="skipped", error=error)
        where = await self._where(job)
        if where is None:
            error = f"its session {job.target_session} no longer exists"
            return await self._failed(job, due, error, None, now, give_up=True)
        if job.kind == "heartbeat" and isinstance(schedule, Every):
            idle_until = await self._busy_until(where.session_id, schedule.every_s, job)
            if idle_until is not None and idle_until > now:  # the chat talked lately
                return await self._done(job, due, "skipped", idle_until, now, error="chat active")
        return await self._turn(job, due, now, plan.next_at, principal, where)

    async def release(self, job: JobInfo) -> None:
        """Let the claim go without a result (shutdown mid-run): another worker redoes it."""
        with contextlib.suppress(Exception):
            await self._jobs.finish(job.id, worker=self._worker)

    async def crashed(self, job: JobInfo, exc: Exception) -> RunResult | None:
        """An unexpected error ended the run: record it and retry with backoff."""
        now = self._clock()
        due = job.claim_due if job.claim_due is not None else now
        error = f"{type(exc).__name__}: {exc}"[:300]
        following: float | None = None
        with contextlib.suppress(ValueError):  # a schedule that no longer parses: no next run
            schedule = parse_schedule(job.schedule)
            following = next_after(schedule, now, zone_named(job.timezone), phase=due)
        with contextlib.suppress(Exception):
            return await self._failed(job, due, error, following, now)
        return None

    # ---- the turn -----------------------------------------------------------------------

    async def _turn(
        self,
        job: JobInfo,
        due: float,
        now: float,
        following: float | None,
        principal: Principal,
        where: _Where,
    ) -> RunResult:
        if not self._config.schedule.allow_from_jobs:
            principal = dataclasses.replace(principal, tools=principal.tools - {"schedule"})
        platform = where.chat.platform if where.chat is not None else _platform_of(principal)
        message = InboundMessage(
            chat=where.chat or ChatRef(platform=platform, chat_id=where.session_id),
            user_id=principal.id,
            user_name=principal.name,
            text=run_prompt(job, now=now),
            is_direct=where.owner == job.owner,
        )
        model = job.model
        options = TurnOptions(model=model) if model else None
        log.info("job_run_started", job_id=job.id, kind=job.kind, session_id=where.session_id)
        access = TurnAccess(principal=principal, scope=ReadScope(owner=where.owner))
        outcome = await self._submit(message, where.session_id, access, options)
        if outcome.kind != "reply":
            error = _failure_text(outcome)
            return await self._failed(job, due, error, following, now, where=where)
        reply = outcome.reply
        if is_silent(reply):
            return await self._done(job, due, "silent", following, now, reply=reply)
        if where.chat is None:
            return await self._done(job, due, "stored", following, now, reply=reply)
        sent, why_not = await self._deliver(job, due, where.chat, reply)
        outcome_name: JobOutcome = "ok" if sent else "stored"
        return await self._done(
            job, due, outcome_name, following, now, reply=reply, sent=sent, error=why_not
        )

    async def _submit(
        self,
        message: InboundMessage,
        session_id: str,
        access: TurnAccess,
        options: TurnOptions | None,
    ) -> TurnOutcome:
        done = self._runner.submit(
            message, WholeReplySink(), session_id=session_id, access=access, options=options
        )
        try:
            async with asyncio.timeout(self._config.schedule.run_timeout_s):
                return await asyncio.shield(done)
        except TimeoutError:
            self._runner.interrupt(done)
            await asyncio.wait({done}, timeout=10)  # the interrupted turn settles its transcript
            timeout_s = self._config.schedule.run_timeout_s
            return TurnOutcome(
                reply=f"the run took longer than {timeout_s:g} s",
                session_id=session_id,
                kind="failed",
            )

    async def _where(self, job: JobInfo) -> _Where | None:
        store = self._runner.store
        match job.target_kind:
            case "chat":
                assert job.target_platform and job.target_chat and job.target_key
                owner = _chat_target_owner(job)
                info = await store.sessions.get_or_create_for_chat(
                    job.target_platform,
                    job.target_key,
                    user_id=job.owner.partition(":")[2],
                    model=self._config.model.default,
                    owner=owner,
                )
                chat = ChatRef(
                    platform=cast(PlatformName, job.target_platform),
                    chat_id=job.target_chat,
                    thread_id=job.target_thread,
                )
                return _Where(session_id=info.id, chat=chat, owner=owner)
            case "session":
                assert job.target_session
                session = await store.sessions.get_session(job.target_session)
                if session is None or not _may_run_in(job, session.owner):
                    return None  # gone, or (a hand-edited job) someone else's
                found = chat_of_key(session.chat_key) if session.chat_key else None
                reached: ChatRef | None = None
                if found is not None and found.chat_id is not None:
                    reached = ChatRef(
                        platform=cast(PlatformName, found.platform),
                        chat_id=found.chat_id,
                        thread_id=found.thread_id,
                    )
                return _Where(session_id=session.id, chat=reached, owner=session.owner)
            case _:
                fresh = await store.sessions.create_session(
                    platform=JOBS_PLATFORM,
                    chat_key=f"job:{job.id}",
                    user_id=job.owner,
                    title=f"job #{job.id}",
                    model=self._config.model.default,
                    owner=job.owner,
                )
                return _Where(session_id=fresh.id, chat=None, owner=job.owner)

    async def _busy_until(self, session_id: str, every_s: float, job: JobInfo) -> float | None:
        """When a heartbeat may next fire: `every_s` after the chat last talked. The beat's own
        turn (it ended at `last_run_at`) does not count as the chat talking."""
        info = await self._runner.store.sessions.get_session(session_id)
        if info is None or info.total_messages <= 1:  # nothing said yet (a system prompt at most)
            return None
        if job.last_run_at is not None and info.updated_at <= job.last_run_at:
            return None
        return info.updated_at + every_s

    # ---- delivery and results -------------------------------------------------------------

    async def _deliver(
        self, job: JobInfo, due: float, chat: ChatRef, text: str
    ) -> tuple[bool, str | None]:
        """Send `text` once to `chat`: (sent, why not). Recorded before the send."""
        adapter = self._runner.adapters.get(chat.platform)
        if adapter is None or (isinstance(adapter, ElectedAdapter) and not adapter.is_leader):
            return False, f"{chat.platform} is not connected here; the reply is in the session"
        if not await self._jobs.record_delivery(job.id, worker=self._worker, due=due):
            log.warning("job_delivery_skipped", job_id=job.id, why="delivered or claim lost")
            return False, None
        try:
            for piece in adapter.render(text):
                await adapter.send(chat, piece)
        except HermesError as exc:
            log.warning("job_delivery_failed", job_id=job.id, error=str(exc)[:200])
            return False, f"could not send to {chat.platform}: {exc}"
        log.info("job_delivered", job_id=job.id, platform=chat.platform)
        return True, None

    async def _done(
        self,
        job: JobInfo,
        due: float,
        outcome: JobOutcome,
        following: float | None,
        now: float,
        *,
        reply: str = "",
        sent: bool = False,
        error: str | None = None,
    ) -> RunResult:
        ran = outcome in ("ok", "silent", "stored", "redone")
        changes: dict[str, Any] = {
            "next_run_at": following,
            "last_outcome": outcome,
            "last_error": error,
            "failures": 0,
        }
        if ran:  # when it ended: a heartbeat's own turn is not the chat talking
            changes.update(last_run_at=self._clock(), runs=job.runs + 1)
        await self._jobs.finish(job.id, worker=self._worker, **changes)
        log.info("job_run_finished", job_id=job.id, outcome=outcome, next_at=following)
        return RunResult(
            job_id=job.id,
            due=due,
            outcome=outcome,
            reply=reply,
            error=error,
            sent=sent,
            next_at=following,
        )

    async def _failed(
        self,
        job: JobInfo,
        due: float,
        error: str,
        following: float | None,
        now: float,
        *,
        give_up: bool = False,
        where: _Where | None = None,
    ) -> RunResult:
        """Record a failed try; retry with backoff, or after `MAX_ATTEMPTS` go on with the
        next run (`following`); tell the owner in one line where the job delivers."""
        failures = job.failures + 1
        if give_up or failures >= MAX_ATTEMPTS:
            next_at, failures = following, 0
            then = "gave up on this run" + (
                f"; next run {format_local(next_at, zone_named(job.timezone))}" if next_at else ""
            )
        else:
            next_at = now + retry_delay_s(failures)
            then = f"retrying at {format_local(next_at, zone_named(job.timezone))}"
        prompt = job.prompt if len(job.prompt) <= 40 else job.prompt[:39] + "…"
        line = f"⚠️ Job #{job.id} (“{prompt}”) failed: {error[:200]} ({then})."
        sent = False
        if where is not None and where.chat is not None:
            sent, _ = await self._deliver(job, due, where.chat, line)
        await self._jobs.finish(
            job.id,
            worker=self._worker,
            next_run_at=next_at,
            last_run_at=now,
            last_outcome="failed",
            last_error=error,
            failures=failures,
        )
        log.warning("job_run_failed", job_id=job.id, failures=failures, told=sent)
        return RunResult(
            job_id=job.id, due=due, outcome="failed", error=error, sent=sent, next_at=next_at
        )


def _catch_up(job: JobInfo) -> Any:
    return job.catch_up if job.catch_up in ("once", "all", "skip") else "once"


def _chat_target_owner(job: JobInfo) -> str:
    """Who owns the chat a job posts to: a group chat (its key `<platform>:chat:<id>…`) owns
    its sessions; a direct chat is the job owner's."""
    platform, chat = job.target_platform or "", job.target_chat or ""
    if (job.target_key or "").startswith(f"{platform}:chat:"):
        return chat_owner(platform, chat)
    return job.owner


def _may_run_in(job: JobInfo, owner: str) -> bool:
    """A job runs in its owner's sessions, or in those of a group chat (made there)."""
    platform = job.owner.partition(":")[0]
    return owner == job.owner or owner.startswith(f"{platform}:chat:")


def _platform_of(principal: Principal) -> PlatformName:
    if principal.platform in ("telegram", "discord", "http", "terminal"):
        return cast(PlatformName, principal.platform)
    return "terminal"


def _failure_text(outcome: TurnOutcome) -> str:
    if outcome.error is not None:
        return str(outcome.error)[:300]
    if outcome.busy:
        return "its session stayed busy"
    if outcome.kind == "interrupted":
        return "the run was interrupted"
    return outcome.reply.removeprefix("⚠️").strip()[:300] or "the turn failed"
