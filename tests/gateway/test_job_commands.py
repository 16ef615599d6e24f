"""`/remind`, `/jobs`, `/heartbeat` on a real store: what they make, and what bad input gets
(a clear answer, nothing stored)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.access import Principal
from agent.config import HermesConfig
from gateway.commands import HELP_TEXT, parse_command
from gateway.job_commands import heartbeat_command, jobs_command, remind_command
from gateway.platforms.base import ChatRef, InboundMessage
from state import SqlSessionStore

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=BERLIN).timestamp()
ALICE = Principal(platform="telegram", id="1")
CONFIG = HermesConfig.model_validate({"schedule": {"timezones": {"telegram:1": "Europe/Berlin"}}})
MESSAGE = InboundMessage(
    chat=ChatRef(platform="telegram", chat_id="1"), user_id="1", text="", is_direct=True
)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlSessionStore]:
    async with await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 's.db'}") as s:
        yield s


async def remind(store: SqlSessionStore, text: str) -> str:
    return await remind_command(
        store.jobs, CONFIG, ALICE, MESSAGE, text, key="telegram:dm:1", session_id="s",
        clock=lambda: NOW,
    )  # fmt: skip


def test_the_commands_are_in_help_and_parse() -> None:
    """The one command table shows them in /help; they parse with their argument."""
    for name in ("/remind", "/jobs", "/heartbeat"):
        assert f"\n{name} " in HELP_TEXT
    command = parse_command("/remind@hermes_bot in 20m call the bank")
    assert command is not None and command.argument == "in 20m call the bank"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("in 20m call the bank", "2026-12-01 10:20 CET"),
        ("tomorrow 9:00 pay rent", "2026-12-02 09:00 CET"),
        ("2026-12-24 18:00 presents", "2026-12-24 18:00 CET"),
        ("7pm call mum", "2026-12-01 19:00 CET"),
    ],
)
async def test_remind_reads_the_time_in_the_users_zone(
    store: SqlSessionStore, text: str, when: str
) -> None:
    answer = await remind(store, text)
    assert answer == f"⏰ Reminder #1 set for {when}."
    (job,) = await store.jobs.list_jobs(owner="telegram:1")
    assert (job.kind, job.target_kind, job.target_chat, job.timezone) == (
        "reminder", "chat", "1", "Europe/Berlin",
    )  # fmt: skip


@pytest.mark.parametrize(
    "text", ["", "in 20m", "banana split", "yesterday call", "every 10s spam", "in 0m x"]
)
async def test_bad_reminders_are_answered_and_nothing_is_stored(
    store: SqlSessionStore, text: str
) -> None:
    answer = await remind(store, text)
    assert answer.startswith(("Use /remind", "Not set:"))
    assert await store.jobs.list_jobs(owner=None) == []


async def test_odd_and_huge_text(store: SqlSessionStore) -> None:
    """Emoji and right-to-left text are kept; a prompt past 4,000 characters is refused."""
    assert (await remind(store, "in 5m 🎉 مرحبا \u202e x")).startswith("⏰")
    (job,) = await store.jobs.list_jobs(owner=None)
    assert job.prompt == "🎉 مرحبا \u202e x"
    refused = await remind(store, "in 5m " + "x" * 5000)
    assert refused.startswith("Not set:") and "4000" in refused


async def test_jobs_and_heartbeat_answer_bad_input_plainly(store: SqlSessionStore) -> None:
    for argument in ("cancel", "cancel abc", "explode 1"):
        assert (await jobs_command(store.jobs, CONFIG, ALICE, argument)).startswith("/jobs lists")
    for argument in ("every", "every 30m", "every 10s ping", "hourly ping"):
        answer = await heartbeat_command(
            store.jobs, CONFIG, ALICE, MESSAGE, argument, key="telegram:dm:1", session_id="s"
        )
        assert answer.startswith(("Use /heartbeat", "Not set:")), answer
    assert await store.jobs.list_jobs(owner=None) == []


@pytest.mark.parametrize(("every", "ttl", "noted"), [("30m", "5m", True), ("30m", "1h", False)])
async def test_a_heartbeat_longer_than_the_cache_says_what_it_costs(
    store: SqlSessionStore, every: str, ttl: str, noted: bool
) -> None:
    """Beats further apart than the prompt cache lasts each pay for the whole conversation:
    the answer says so (and points at the costs in docs/jobs.md)."""
    config = HermesConfig.model_validate({"prompt_caching": {"cache_ttl": ttl}})
    answer = await heartbeat_command(
        store.jobs, config, ALICE, MESSAGE, f"every {every} any news?",
        key="telegram:dm:1", session_id="s",
    )  # fmt: skip
    assert answer.startswith("💓 Heartbeat #1")
    assert ("full price" in answer and "docs/jobs.md" in answer) is noted
