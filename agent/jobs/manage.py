"""Making and managing one person's jobs: a view of the job store bound to its owner.

The `schedule` tool, the chat commands (`/remind`, `/jobs`, `/heartbeat`) and `hermes cron` all
go through `OwnedJobs`, so each person only ever lists, changes or removes their own jobs, and
every job is checked the same way (a valid schedule, a zone, a prompt) before it is stored.
Also here: the preamble a run's prompt gets, with the silence marker it defines.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias
from zoneinfo import ZoneInfo

from agent.jobs.schedule import (
    CatchUp,
    Schedule,
    describe_schedule,
    format_local,
    next_after,
    parse_quiet_hours,
    parse_schedule,
    schedule_text,
    zone_named,
)
from state.values import JobInfo, JobSpec

if TYPE_CHECKING:
    from agent.config import HermesConfig

__all__ = [
    "SILENCE_MARKER",
    "JobKind",
    "JobStore",
    "JobTarget",
    "OwnedJobs",
    "chat_of_key",
    "is_silent",
    "job_line",
    "owner_zone",
    "run_prompt",
]

JobKind: TypeAlias = Literal["job", "reminder", "heartbeat"]
SILENCE_MARKER = "NOTHING_TO_REPORT"
"""A run whose whole reply is this sends nothing (its preamble tells the model so)."""
MAX_PROMPT_CHARS = 4000
MAX_JOBS_PER_OWNER = 100


class JobStore(Protocol):
    """What a view needs of `state.SqlJobStore`."""

    async def create(self, spec: JobSpec) -> JobInfo: ...
    async def get(self, job_id: int, *, owner: str | None) -> JobInfo | None: ...
    async def list_jobs(self, *, owner: str | None, limit: int = 500) -> list[JobInfo]: ...
    async def update(self, job_id: int, *, owner: str | None, **changes: Any) -> JobInfo | None: ...
    async def remove(self, job_id: int, *, owner: str | None) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class JobTarget:
    """Where a job's runs happen and their replies go."""

    kind: Literal["chat", "session", "fresh"]
    platform: str | None = None
    chat_id: str | None = None
    thread_id: str | None = None
    key: str | None = None
    """The chat's routing key (`telegram:dm:42`), for a chat."""
    session_id: str | None = None

    def describe(self) -> str:
        match self.kind:
            case "chat":
                return f"chat {self.platform}:{self.chat_id}"
            case "session":
                return f"session {self.session_id}"
            case _:
                return "a new session per run"


def chat_of_key(key: str) -> JobTarget | None:
    """The chat a routing key names (`telegram:dm:42` → Telegram chat 42, `discord:chat:9:
    thread:3` → channel 9 thread 3); None for keys of platforms without push (HTTP, terminal)."""
    platform, _, rest = key.partition(":")
    if platform not in ("telegram", "discord"):
        return None
    parts = rest.split(":")
    if len(parts) >= 2 and parts[0] == "dm":
        return JobTarget(kind="chat", platform=platform, chat_id=parts[1], key=key)
    if len(parts) >= 2 and parts[0] == "chat":
        thread = parts[3] if len(parts) >= 4 and parts[2] == "thread" else None
        return JobTarget(
            kind="chat", platform=platform, chat_id=parts[1], thread_id=thread, key=key
        )
    return None


class OwnedJobs:
    """One owner's jobs. Nothing here can reach another owner's job: every call filters by it."""

    def __init__(
        self,
        store: JobStore,
        owner: str,
        *,
        zone: ZoneInfo,
        catch_up: CatchUp = "once",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.owner = owner
        self.zone = zone
        self._catch_up = catch_up
        self._clock = clock

    async def create(
        self,
        *,
        prompt: str,
        schedule: Schedule,
        target: JobTarget,
        kind: JobKind = "job",
        first_at: float | None = None,
        model: str | None = None,
        quiet_hours: str | None = None,
    ) -> JobInfo:
        """Check and store a job; ValueError says what is wrong with it."""
        text = prompt.strip()
        if not text:
            raise ValueError("a job needs a prompt (what to do or say when it runs)")
        if len(text) > MAX_PROMPT_CHARS:
            raise ValueError(f"a job's prompt is at most {MAX_PROMPT_CHARS} characters")
        if quiet_hours is not None:
            quiet_hours = str(parse_quiet_hours(quiet_hours))
        if len(await self._store.list_jobs(owner=self.owner)) >= MAX_JOBS_PER_OWNER:
            raise ValueError(f"you have {MAX_JOBS_PER_OWNER} jobs already; remove some first")
        stored = schedule_text(schedule)
        now = self._clock()
        due = first_at if first_at is not None else next_after(schedule, now, self.zone)
        if due is None:
            raise ValueError("that schedule never fires (a time already past?)")
        spec = JobSpec(
            owner=self.owner,
            kind=kind,
            target_kind=target.kind,
            target_platform=target.platform if target.kind == "chat" else None,
            target_chat=target.chat_id,
            target_thread=target.thread_id,
            target_key=target.key,
            target_session=target.session_id,
            schedule=stored,
            timezone=self.zone.key,
            prompt=text,
            model=model,
            quiet_hours=quiet_hours,
            catch_up=self._catch_up,
            next_run_at=due,
        )
        return await self._store.create(spec)

    async def list_jobs(self) -> list[JobInfo]:
        return await self._store.list_jobs(owner=self.owner)

    async def get(self, job_id: int) -> JobInfo | None:
        return await self._store.get(job_id, owner=self.owner)

    async def cancel(self, job_id: int) -> bool:
        return await self._store.remove(job_id, owner=self.owner)

    async def set_paused(self, job_id: int, paused: bool) -> JobInfo | None:
        """Pause or resume; a resumed job's next run is its first one still ahead."""
        job = await self.get(job_id)
        if job is None:
            return None
        changes: dict[str, Any] = {"paused": paused}
        if not paused and job.next_run_at is not None and job.next_run_at < self._clock():
            zone = zone_named(job.timezone)
            ahead = next_after(
                parse_schedule(job.schedule), self._clock(), zone, phase=job.next_run_at
            )
            changes["next_run_at"] = ahead
        return await self._store.update(job_id, owner=self.owner, **changes)

    async def run_now(self, job_id: int) -> JobInfo | None:
        """Make the job due now (the next tick of a gateway runs it)."""
        return await self._store.update(
            job_id, owner=self.owner, next_run_at=self._clock(), paused=False
        )

    async def update(
        self,
        job_id: int,
        *,
        prompt: str | None = None,
        schedule: Schedule | None = None,
        first_at: float | None = None,
        model: str | None = None,
        quiet_hours: str | None = None,
    ) -> JobInfo | None:
        """Change what the owner asked to change; None when there is no such job of theirs."""
        changes: dict[str, Any] = {}
        if prompt is not None:
            if not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
                raise ValueError(f"a prompt is 1 to {MAX_PROMPT_CHARS} characters")
            changes["prompt"] = prompt.strip()
        if schedule is not None:
            changes["schedule"] = schedule_text(schedule)
            due = (
                first_at if first_at is not None else next_after(schedule, self._clock(), self.zone)
            )
            if due is None:
                raise ValueError("that schedule never fires (a time already past?)")
            changes["next_run_at"] = due
        if model is not None:
            changes["model"] = model or None
        if quiet_hours is not None:
            changes["quiet_hours"] = str(parse_quiet_hours(quiet_hours)) if quiet_hours else None
        return await self._store.update(job_id, owner=self.owner, **changes)


def owner_zone(config: HermesConfig, owner: str) -> ZoneInfo:
    """An owner's time zone: `schedule.timezones[owner]`, else `schedule.timezone`."""
    return zone_named(config.schedule.timezones.get(owner, config.schedule.timezone))


def job_line(job: JobInfo, *, now: float) -> str:
    """`#12 every 30m → chat telegram:42 · next 2026-12-01 09:00 CET · last ok: “Check …”`."""
    zone = zone_named(job.timezone)
    try:
        when = describe_schedule(parse_schedule(job.schedule), zone)
    except ValueError:
        when = job.schedule
    if job.paused:
        state = "paused"
    elif job.next_run_at is None:
        state = "done"
    else:
        state = f"next {format_local(job.next_run_at, zone)}"
    last = ""
    if job.last_outcome is not None:
        error = f" ({job.last_error[:120]})" if job.last_error else ""
        last = f" · last {job.last_outcome}{error}"
    prompt = job.prompt if len(job.prompt) <= 60 else job.prompt[:59] + "…"
    target = _target_text(job)
    return f"#{job.id} {job.kind} {when} → {target} · {state}{last}: “{prompt}”"


def _target_text(job: JobInfo) -> str:
    match job.target_kind:
        case "chat":
            return f"chat {job.target_platform}:{job.target_chat}"
        case "session":
            return f"session {job.target_session}"
        case _:
            return "new session each run"


def run_prompt(job: JobInfo, *, now: float) -> str:
    """What the model is asked when the job runs: who set it up and when it is, the silence
    rule, then the owner's prompt."""
    zone = zone_named(job.timezone)
    kind = {"reminder": "a reminder", "heartbeat": "a heartbeat check-in"}.get(job.kind, "a job")
    lines = [
        f"[Scheduled run of {kind} (#{job.id}) set up by the user; it is now "
        f"{format_local(now, zone)}. Nobody is waiting at the keyboard: do what it asks and "
        "reply with the result for the user.",
        f"If there is nothing worth telling them, reply with exactly {SILENCE_MARKER} and "
        "nothing else; then nothing is sent.]",
        "",
        job.prompt,
    ]
    if job.kind == "reminder":
        lines[-1] = f"Remind the user: {job.prompt}"
    return "\n".join(lines)


def is_silent(reply: str) -> bool:
    """The reply is only the silence marker (quotes, punctuation and case aside)."""
    core = reply.strip().strip("`*_\"'“”.!").strip()
    return core.upper() == SILENCE_MARKER
