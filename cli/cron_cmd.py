"""`hermes cron add | list | pause | resume | run | remove`: the operator's scheduled jobs.

Jobs made here belong to the terminal user (`terminal:local`). The operator owns the machine and
its store, so `list`, `pause`, `resume`, `run` and `remove` reach every job, each shown with its
owner, and `list` with its last outcome and error. A running `hermes gateway run` fires them;
`run` only makes a job due now.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any
from zoneinfo import ZoneInfo

from agent.config import HermesConfig
from agent.errors import StoreError
from agent.jobs.manage import JobTarget, OwnedJobs, job_line, owner_zone
from agent.jobs.schedule import (
    Once,
    Schedule,
    parse_duration,
    parse_schedule,
    parse_when,
    zone_named,
)
from state import JobInfo, SqlJobStore, SqlSessionStore

__all__ = ["OPERATOR", "add_cron_parser", "cron_command", "run_cron_cli"]

OPERATOR = "terminal:local"


def add_cron_parser(sub: Any) -> None:
    """Add `cron` and its actions to the `hermes` sub-parsers."""
    cron = sub.add_parser(
        "cron",
        help="reminders and scheduled jobs: add, list, pause, resume, run, remove",
        description="Jobs a running `hermes gateway run` fires (see docs/jobs.md). Times are "
        "read in schedule.timezone (or schedule.timezones['terminal:local']).",
    )
    actions = cron.add_subparsers(dest="cron_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="make a job: one of --in, --at, --every, --cron")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--in", dest="in_", metavar="DURATION", help="once, after 20m, 2h, 1d")
    when.add_argument("--at", metavar="TIME", help="once, at 9:00, 'tomorrow 9:00', an ISO time")
    when.add_argument("--every", metavar="DURATION", help="repeat at this interval (30m, 1d)")
    when.add_argument("--cron", metavar="EXPR", help="repeat on a 5-field cron expression")
    where = add.add_mutually_exclusive_group()
    where.add_argument("--session", metavar="ID", help="run in this session (default: a new one)")
    where.add_argument(
        "--chat", metavar="PLATFORM:ID", help="run in and deliver to this chat, e.g. telegram:42"
    )
    add.add_argument("--model", metavar="NAME", help="answer with this model")
    add.add_argument("--quiet", metavar="HH:MM-HH:MM", help="no runs in this window")
    add.add_argument("prompt", help="what to do when it runs")
    listing = actions.add_parser("list", help="every job with its next run and last outcome")
    listing.add_argument("--json", action="store_true", help="one JSON array of every field")
    for name, text in (
        ("pause", "stop a job firing until resumed"),
        ("resume", "let a paused job fire again (from its next run ahead)"),
        ("run", "make a job due now (a running gateway fires it)"),
        ("remove", "delete a job"),
    ):
        act = actions.add_parser(name, help=text)
        act.add_argument(
            "job_id", type=int, metavar="ID", help="the job's number (hermes cron list)"
        )


async def run_cron_cli(args: argparse.Namespace, config: HermesConfig, url: str) -> int:
    """Open the store, act, print; exit 1 with one sentence on a store error or bad input."""
    try:
        async with await SqlSessionStore.open(url) as store:
            code, out = await cron_command(args, config, store)
    except StoreError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    stream = sys.stdout if code == 0 else sys.stderr
    stream.write(out if out.endswith("\n") else out + "\n")
    return code


async def cron_command(
    args: argparse.Namespace, config: HermesConfig, store: SqlSessionStore
) -> tuple[int, str]:
    """(exit code, text) of one `hermes cron` action."""
    jobs = store.jobs
    view = OwnedJobs(
        jobs,
        OPERATOR,
        zone=owner_zone(config, OPERATOR),
        catch_up=config.schedule.catch_up,
    )
    action = args.cron_command
    if action == "add":
        try:
            job = await _add(args, view, store)
        except ValueError as exc:
            return 2, f"hermes cron add: {exc}"
        return 0, f"Added {job_line(job, now=time.time())}"
    if action == "list":
        return 0, await _list(jobs, as_json=args.json)
    return await _act(jobs, action, args.job_id)


async def _add(args: argparse.Namespace, view: OwnedJobs, store: SqlSessionStore) -> JobInfo:
    now = time.time()
    schedule: Schedule
    first_at = None
    if args.in_:
        first_at = now + parse_duration(args.in_)
        schedule = Once(at=first_at)
    elif args.at:
        first_at = parse_when(args.at, now=now, zone=view.zone)
        schedule = Once(at=first_at)
    elif args.every:
        schedule = parse_schedule(f"every:{parse_duration(args.every)}")
    else:
        schedule = parse_schedule(f"cron:{args.cron}")
    target = await _target(args, store)
    return await view.create(
        prompt=args.prompt,
        schedule=schedule,
        first_at=first_at,
        target=target,
        kind="reminder" if isinstance(schedule, Once) else "job",
        model=args.model,
        quiet_hours=args.quiet,
    )


async def _target(args: argparse.Namespace, store: SqlSessionStore) -> JobTarget:
    if args.session:
        if await store.sessions.get_session(args.session) is None:
            raise ValueError(f"there is no session {args.session!r} (hermes sessions list)")
        return JobTarget(kind="session", session_id=args.session)
    if args.chat:
        platform, _, chat_id = args.chat.partition(":")
        if platform not in ("telegram", "discord") or not chat_id.strip():
            raise ValueError("--chat takes PLATFORM:ID with telegram or discord, e.g. telegram:42")
        chat_id = chat_id.strip()
        # A private chat's id is its user's (Telegram); a group's starts with "-".
        key = (
            f"{platform}:chat:{chat_id}" if chat_id.startswith("-") else f"{platform}:dm:{chat_id}"
        )
        return JobTarget(kind="chat", platform=platform, chat_id=chat_id, key=key)
    return JobTarget(kind="fresh")


async def _list(jobs: SqlJobStore, *, as_json: bool) -> str:
    every = await jobs.list_jobs(owner=None)
    if as_json:
        return json.dumps([j.as_dict() for j in every], ensure_ascii=False, indent=2)
    if not every:
        return "No jobs. hermes cron add makes one."
    now = time.time()
    return "\n".join(f"{job_line(j, now=now)}  [owner {j.owner}]" for j in every)


async def _act(jobs: SqlJobStore, action: str, job_id: int) -> tuple[int, str]:
    job = await jobs.get(job_id, owner=None)
    if job is None:
        return 1, f"hermes cron {action}: there is no job #{job_id} (hermes cron list)"
    view = OwnedJobs(jobs, job.owner, zone=_zone(job))
    match action:
        case "remove":
            await view.cancel(job_id)
            return 0, f"Removed job #{job_id}."
        case "pause" | "resume":
            changed = await view.set_paused(job_id, action == "pause")
        case "run":
            changed = await view.run_now(job_id)
        case _:
            return 2, f"hermes cron: unknown action {action!r}"
    assert changed is not None
    return 0, job_line(changed, now=time.time())


def _zone(job: JobInfo) -> ZoneInfo:
    return zone_named(job.timezone)
