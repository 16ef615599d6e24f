"""`/remind`, `/jobs` and `/heartbeat`: a person's own jobs from any chat.

Each command acts through `OwnedJobs` bound to the sender's `Principal.owner`, so a person
lists, changes and cancels only their own jobs; a job made here delivers to the chat it was
made in (a push chat), or to the session (terminal, HTTP).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

from agent.access import Principal
from agent.config import HermesConfig
from agent.jobs.manage import JobStore, JobTarget, OwnedJobs, job_line, owner_zone
from agent.jobs.schedule import (
    Every,
    Once,
    Schedule,
    format_local,
    parse_duration,
    parse_quiet_hours,
    parse_schedule,
    parse_when,
)
from gateway.platforms.base import InboundMessage
from state import JobInfo

__all__ = ["heartbeat_command", "jobs_command", "jobs_of", "remind_command"]

REMIND_USAGE = (
    "Use /remind WHEN TEXT, e.g. /remind in 20m call the bank, /remind tomorrow 9:00 "
    "pay rent, /remind every 1d take the pills."
)
HEARTBEAT_USAGE = (
    "Use /heartbeat every 30m [quiet 22:00-07:00] PROMPT to check in when this chat has been "
    "quiet that long, or /heartbeat off."
)
JOBS_USAGE = "/jobs lists your jobs; /jobs cancel|pause|resume|run N acts on one."


def jobs_of(store: object) -> JobStore | None:
    """The jobs of a session store (`SqlSessionStore.jobs`); None for a store without them."""
    return cast("JobStore | None", getattr(store, "jobs", None))


def _view(
    jobs: JobStore, principal: Principal, config: HermesConfig, clock: Callable[[], float]
) -> OwnedJobs:
    zone = owner_zone(config, principal.owner)
    return OwnedJobs(
        jobs, principal.owner, zone=zone, catch_up=config.schedule.catch_up, clock=clock
    )


def _target(message: InboundMessage, key: str, session_id: str) -> JobTarget:
    chat = message.chat
    if chat.platform in ("telegram", "discord"):
        return JobTarget(
            kind="chat",
            platform=chat.platform,
            chat_id=chat.chat_id,
            thread_id=chat.thread_id,
            key=key,
        )
    return JobTarget(kind="session", session_id=session_id)


def split_when(text: str, *, now: float, view: OwnedJobs) -> tuple[Schedule, float | None, str]:
    """`every 1d TEXT` or `WHEN TEXT` (the longest leading words that read as a time)."""
    words = text.split()
    if len(words) >= 2 and words[0].lower() == "every":
        every = parse_schedule(f"every:{parse_duration(words[1])}")
        return every, None, " ".join(words[2:])
    for n in (3, 2, 1):
        if len(words) <= n - 1:
            continue
        try:
            at = parse_when(" ".join(words[:n]), now=now, zone=view.zone)
        except ValueError:
            continue
        return Once(at=at), at, " ".join(words[n:])
    raise ValueError(REMIND_USAGE)


async def remind_command(
    jobs: JobStore,
    config: HermesConfig,
    principal: Principal,
    message: InboundMessage,
    argument: str,
    *,
    key: str,
    session_id: str,
    clock: Callable[[], float] = time.time,
) -> str:
    view = _view(jobs, principal, config, clock)
    now = clock()
    try:
        schedule, first_at, text = split_when(argument, now=now, view=view)
        if not text.strip():
            return REMIND_USAGE
        job = await view.create(
            prompt=text,
            schedule=schedule,
            first_at=first_at,
            target=_target(message, key, session_id),
            kind="reminder",
        )
    except ValueError as exc:
        return f"Not set: {exc}"
    assert job.next_run_at is not None
    return f"⏰ Reminder #{job.id} set for {format_local(job.next_run_at, view.zone)}."


async def jobs_command(
    jobs: JobStore,
    config: HermesConfig,
    principal: Principal,
    argument: str,
    *,
    clock: Callable[[], float] = time.time,
) -> str:
    view = _view(jobs, principal, config, clock)
    words = argument.split()
    if not words:
        mine = await view.list_jobs()
        if not mine:
            return "You have no jobs. /remind, /heartbeat or the schedule tool make one."
        lines = [job_line(j, now=clock()) for j in mine]
        return "Your jobs:\n" + "\n".join(lines) + "\n" + JOBS_USAGE
    action = words[0].lower()
    raw = words[1].lstrip("#") if len(words) > 1 else ""
    if action not in ("cancel", "pause", "resume", "run") or not raw.isdigit():
        return JOBS_USAGE
    job_id = int(raw)
    if action == "cancel":
        return f"Cancelled job #{job_id}." if await view.cancel(job_id) else _none(job_id)
    if action == "run":
        job = await view.run_now(job_id)
    else:
        job = await view.set_paused(job_id, action == "pause")
    if job is None:
        return _none(job_id)
    return job_line(job, now=clock())


async def heartbeat_command(
    jobs: JobStore,
    config: HermesConfig,
    principal: Principal,
    message: InboundMessage,
    argument: str,
    *,
    key: str,
    session_id: str,
    clock: Callable[[], float] = time.time,
) -> str:
    view = _view(jobs, principal, config, clock)
    target = _target(message, key, session_id)
    words = argument.split()
    mine = [j for j in await view.list_jobs() if j.kind == "heartbeat" and _same(j, target)]
    if not words:
        return job_line(mine[0], now=clock()) if mine else "No heartbeat here. " + HEARTBEAT_USAGE
    if words[0].lower() == "off":
        for job in mine:
            await view.cancel(job.id)
        return "Heartbeat off." if mine else "There was no heartbeat here."
    if words[0].lower() != "every" or len(words) < 3:
        return HEARTBEAT_USAGE
    try:
        every_s = parse_duration(words[1])
        schedule = parse_schedule(f"every:{every_s}")
        rest = words[2:]
        quiet = None
        if len(rest) >= 2 and rest[0].lower() == "quiet":
            quiet, rest = str(parse_quiet_hours(rest[1])), rest[2:]
        if not rest:
            return HEARTBEAT_USAGE
        assert isinstance(schedule, Every)
        job = await view.create(
            prompt=" ".join(rest),
            schedule=schedule,
            target=target,
            kind="heartbeat",
            model=config.schedule.heartbeat_model,
            quiet_hours=quiet,
        )
    except ValueError as exc:
        return f"Not set: {exc}"
    for old in mine:  # one heartbeat per chat: the new one replaces it
        await view.cancel(old.id)
    return f"💓 Heartbeat #{job.id}: {job_line(job, now=clock())}" + _cache_note(every_s, config)


def _cache_note(every_s: float, config: HermesConfig) -> str:
    """What a beat costs when the prompt cache will have expired by then (pure)."""
    ttl_s = 3600.0 if config.prompt_caching.cache_ttl == "1h" else 300.0
    if not config.prompt_caching.enabled or every_s <= ttl_s:
        return ""
    return (
        f"\nNote: each beat re-reads this conversation at full price (the prompt cache lasts "
        f"{config.prompt_caching.cache_ttl}); see docs/jobs.md for what heartbeats cost."
    )


def _same(job: JobInfo, target: JobTarget) -> bool:
    if job.target_key is not None:
        return job.target_key == target.key
    return job.target_session is not None and job.target_session == target.session_id


def _none(job_id: int) -> str:
    return f"You have no job #{job_id}; /jobs lists yours."
