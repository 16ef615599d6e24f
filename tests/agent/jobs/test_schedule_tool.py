"""The `schedule` tool on a real store (SQLite file) with a fixed clock: what the model sees,
what it can make, and that one user's calls never reach another's jobs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.access import Principal
from agent.jobs.schedule_tool import schedule_tool
from agent.messages import ToolCall
from agent.tools.registry import ToolContext, ToolRegistry
from state import SqlSessionStore

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 12, 1, 10, 17, tzinfo=BERLIN).timestamp()
ALICE = Principal(platform="telegram", id="1", tools=frozenset({"schedule"}))
BOB = Principal(platform="telegram", id="2", tools=frozenset({"schedule"}))


def zone_for(owner: str) -> ZoneInfo:
    return BERLIN if owner == ALICE.owner else ZoneInfo("America/New_York")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlSessionStore]:
    async with await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 's.db'}") as s:
        yield s


async def call(store: SqlSessionStore, who: Principal, **args: Any) -> str:
    registry = ToolRegistry([schedule_tool(zone_for, clock=lambda: NOW)])
    session = await store.sessions.get_or_create_for_chat("telegram", f"telegram:dm:{who.id}")
    ctx = ToolContext(
        session_id=session.id,
        principal=who,
        services={"store": store, "jobs": store.jobs},
    )
    tool_call: ToolCall = {
        "id": "c",
        "type": "function",
        "function": {"name": "schedule", "arguments": json.dumps(args)},
    }
    return await registry.run(tool_call, ctx)


def test_the_description_names_the_users_zone_date_and_hour() -> None:
    """Each user is told their own zone and today's date and hour there (not the minute,
    which would change the cached tool list every minute)."""
    tool = schedule_tool(zone_for, clock=lambda: NOW)
    alice = tool.spec_for(ALICE).description
    bob = tool.spec_for(BOB).description
    assert "Europe/Berlin" in alice and "Tuesday 2026-12-01, 10:xx" in alice
    assert "America/New_York" in bob and "2026-12-01, 04:xx" in bob
    assert ":17" not in alice


async def test_create_reads_times_in_the_users_zone(store: SqlSessionStore) -> None:
    """`at: tomorrow 9:00` is 09:00 Berlin; the result states it and the exact time now; the
    job delivers to the chat the turn is in."""
    out = await call(store, ALICE, action="create", prompt="pay rent", at="tomorrow 9:00")
    assert out.startswith("Created. #1 reminder once at 2026-12-02 09:00 CET → chat telegram:1")
    assert "(now: 2026-12-01 10:17 CET)" in out
    (job,) = await store.jobs.list_jobs(owner=ALICE.owner)
    assert job.next_run_at == datetime(2026, 12, 2, 9, 0, tzinfo=BERLIN).timestamp()
    assert (job.target_kind, job.target_chat, job.target_key) == ("chat", "1", "telegram:dm:1")


async def test_recurring_jobs_and_updates(store: SqlSessionStore) -> None:
    """A weekday cron job is listed, moved to another schedule and cancelled."""
    await call(store, ALICE, action="create", prompt="inbox summary", cron="0 8 * * 1-5")
    listed = await call(store, ALICE, action="list")
    assert "cron 0 8 * * 1-5 (Europe/Berlin)" in listed and "next 2026-12-02 08:00 CET" in listed
    moved = await call(store, ALICE, action="update", job_id=1, every="2h")
    assert "every 2h" in moved and "next 2026-12-01 12:17 CET" in moved
    assert await call(store, ALICE, action="cancel", job_id=1) == "Cancelled job #1."
    assert await call(store, ALICE, action="list") == "The user has no scheduled jobs."


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"action": "create", "prompt": "x"}, "one of in, at, every or cron"),
        ({"action": "create", "prompt": "x", "in": "5m", "cron": "* * * * *"}, "only one"),
        ({"action": "create", "prompt": "x", "cron": "99 * * * *"}, "not a valid cron"),
        ({"action": "create", "prompt": "x", "every": "10s"}, "at least 60"),
        ({"action": "create", "prompt": "x", "at": "2020-01-01 10:00"}, "already past"),
        ({"action": "create", "prompt": "   ", "in": "5m"}, "needs a prompt"),
        ({"action": "cancel"}, "needs the job_id"),
        ({"action": "fly"}, "action must be"),
    ],
)
async def test_bad_calls_get_a_clear_error_and_store_nothing(
    store: SqlSessionStore, args: dict[str, Any], error: str
) -> None:
    out = await call(store, ALICE, **args)
    assert out.startswith("Error: ") and error in out
    assert await store.jobs.list_jobs(owner=None) == []


async def test_a_user_cannot_list_change_or_cancel_another_users_job(
    store: SqlSessionStore,
) -> None:
    """Bob's calls name Alice's job #1: he is told he has none, and her job is untouched."""
    await call(store, ALICE, action="create", prompt="alice secret", **{"in": "1h"})
    assert await call(store, BOB, action="list") == "The user has no scheduled jobs."
    assert await call(store, BOB, action="cancel", job_id=1) == "The user has no job #1."
    updated = await call(store, BOB, action="update", job_id=1, prompt="bob's now")
    assert updated == "The user has no job #1."
    (job,) = await store.jobs.list_jobs(owner=None)
    assert (job.owner, job.prompt) == (ALICE.owner, "alice secret")
