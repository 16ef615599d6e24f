"""The `schedule` tool: the model creates, lists, updates and cancels the user's own jobs.

Its description carries the current date and hour in the user's zone, so the model can turn
"tomorrow at 9" into `at: "tomorrow 9:00"`; the exact moment is computed here from `in` / `at`
(read in the user's zone) and echoed in the result, so the model never does clock arithmetic.
The hour, not the minute, keeps the tool list (the front of the cached prompt) stable within
an hour. The store view comes from `ToolContext.services["jobs"]`, bound to the turn's
principal: a user's tool calls only ever see that user's jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from agent.access import Principal
from agent.errors import ToolError
from agent.jobs.manage import JobStore, JobTarget, OwnedJobs, chat_of_key, job_line
from agent.jobs.schedule import (
    Once,
    Schedule,
    format_local,
    parse_duration,
    parse_schedule,
    parse_when,
)
from agent.providers.base import ToolSpec
from agent.tools.registry import Tool, ToolContext

__all__ = ["ZoneFor", "schedule_tool"]

ZoneFor = Callable[[str], ZoneInfo]
"""The time zone of an owner (`Principal.owner`)."""

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["create", "list", "update", "cancel"]},
        "prompt": {
            "type": "string",
            "description": "What to do or say when it runs, written as an instruction to you.",
        },
        "in": {"type": "string", "description": "Run once after this long: 20m, 2h, 1d."},
        "at": {
            "type": "string",
            "description": "Run once at this time in the user's zone: '9:00', 'tomorrow 9:00', "
            "'2026-12-24 18:00'.",
        },
        "every": {"type": "string", "description": "Repeat at this interval: 30m, 1h, 1d."},
        "cron": {
            "type": "string",
            "description": "Repeat on a 5-field cron expression in the user's zone, e.g. "
            "'0 8 * * 1-5' (weekdays at 08:00).",
        },
        "job_id": {"type": "integer", "description": "The job to update or cancel (see list)."},
        "quiet_hours": {
            "type": "string",
            "description": "No runs in this window, e.g. 22:00-07:00.",
        },
    },
    "required": ["action"],
}


def schedule_tool(zone_for: ZoneFor, *, clock: Callable[[], float] = time.time) -> Tool:
    """The tool to register; the job store comes from `ctx.services["jobs"]` at call time."""

    def describe(principal: Principal | None) -> ToolSpec:
        owner = principal.owner if principal is not None else "terminal:local"
        zone = zone_for(owner)
        now = datetime.fromtimestamp(clock(), zone)
        return ToolSpec(
            name="schedule",
            description=(
                "Reminders and scheduled jobs for the user: create one (a prompt plus exactly "
                "one of in/at/every/cron), list theirs, update or cancel one by job_id. Each run "
                "is a turn of yours whose reply is sent to this chat. The user's time zone is "
                f"{zone.key}; it is now {now:%A %Y-%m-%d}, {now:%H}:xx there (the result "
                "states exact times)."
            ),
            parameters=_PARAMETERS,
        )

    async def handle(args: dict[str, Any], ctx: ToolContext) -> str:
        jobs: JobStore | None = ctx.services.get("jobs")
        if jobs is None or ctx.principal is None:
            raise ToolError("schedule is unavailable in this run")
        zone = zone_for(ctx.principal.owner)
        view = OwnedJobs(jobs, ctx.principal.owner, zone=zone, clock=clock)
        try:
            return await _act(view, args, ctx, clock())
        except ValueError as exc:
            raise ToolError(str(exc)) from exc

    return Tool(spec=describe(None), handler=handle, describe=describe)


async def _act(view: OwnedJobs, args: dict[str, Any], ctx: ToolContext, now: float) -> str:
    action = args.get("action")
    if action not in ("create", "list", "update", "cancel"):
        raise ValueError("action must be create, list, update or cancel")
    if action == "list":
        mine = await view.list_jobs()
        if not mine:
            return "The user has no scheduled jobs."
        return "\n".join(job_line(j, now=now) for j in mine)
    if action == "create":
        schedule, first_at = _schedule_of(args, now=now, view=view)
        if schedule is None:
            raise ValueError("create needs one of in, at, every or cron")
        target = await _target_of(ctx)
        job = await view.create(
            prompt=str(args.get("prompt") or ""),
            schedule=schedule,
            first_at=first_at,
            target=target,
            kind="reminder" if isinstance(schedule, Once) else "job",
            quiet_hours=_opt_str(args.get("quiet_hours")),
        )
        return f"Created. {_with_now(job_line(job, now=now), now, view.zone)}"
    job_id = args.get("job_id")
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ValueError(f"{action} needs the job_id of one of the user's jobs (see list)")
    if action == "cancel":
        if await view.cancel(job_id):
            return f"Cancelled job #{job_id}."
        return f"The user has no job #{job_id}."
    if action == "update":
        schedule, first_at = _schedule_of(args, now=now, view=view)
        prompt = _opt_str(args.get("prompt"))
        quiet = _opt_str(args.get("quiet_hours"))
        updated = await view.update(
            job_id, prompt=prompt, schedule=schedule, first_at=first_at, quiet_hours=quiet
        )
        if updated is None:
            return f"The user has no job #{job_id}."
        return f"Updated. {_with_now(job_line(updated, now=now), now, view.zone)}"
    raise AssertionError(action)


def _schedule_of(
    args: dict[str, Any], *, now: float, view: OwnedJobs
) -> tuple[Schedule | None, float | None]:
    given = [k for k in ("in", "at", "every", "cron") if _opt_str(args.get(k))]
    if len(given) > 1:
        raise ValueError(f"give only one of in, at, every, cron (got {', '.join(given)})")
    if not given:
        return None, None
    value = str(args[given[0]]).strip()
    match given[0]:
        case "in":
            at = now + parse_duration(value)
            return Once(at=at), at
        case "at":
            at = parse_when(value, now=now, zone=view.zone)
            return Once(at=at), at
        case "every":
            return parse_schedule(f"every:{parse_duration(value)}"), None
        case _:
            return parse_schedule(f"cron:{value}"), None


async def _target_of(ctx: ToolContext) -> JobTarget:
    """The chat this turn's session talks to, when it is a push chat; else the session."""
    store = ctx.services.get("store")
    info = await store.sessions.get_session(ctx.session_id) if store is not None else None
    if info is not None and info.chat_key:
        chat = chat_of_key(info.chat_key)
        if chat is not None:
            return chat
    return JobTarget(kind="session", session_id=ctx.session_id)


def _opt_str(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _with_now(line: str, now: float, zone: ZoneInfo) -> str:
    return f"{line} (now: {format_local(now, zone)})"
