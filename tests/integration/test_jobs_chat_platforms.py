"""A reminder made with `/remind` in a chat is delivered to that chat by the platform's adapter,
on Telegram (real python-telegram-bot) and on Discord (real discord.py), each against its fake;
a real Runtime on FakeLLM and SQLite; the scheduler on an injected clock."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.run import GatewayRunner
from gateway.scheduler import JobScheduler
from sim.llm_server import FakeLLM, Turn
from tests.fakes.discord import FakeDiscord, patch_discord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import make_config, start_runtime
from tests.gateway.platform_drivers import (
    DiscordDriver,
    PlatformDriver,
    TelegramDriver,
    wait_until,
)

__all__ = ["patch_discord"]  # the fixture, imported so pytest finds it


@pytest.fixture
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture(params=["telegram", "discord"])
def driver(request: pytest.FixtureRequest) -> PlatformDriver:
    if request.param == "telegram":
        return TelegramDriver(request.getfixturevalue("fake_telegram"))
    fake: FakeDiscord = request.getfixturevalue("patch_discord")
    return DiscordDriver(fake)


async def test_a_reminder_is_delivered_to_the_chat_it_was_made_in(
    driver: PlatformDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/remind in 10m stretch`: confirmed in the chat; ten minutes later (injected clock) the
    model's reply arrives in the same chat, once."""
    offset = [0.0]
    async with FakeLLM() as llm:
        config = make_config(llm, tmp_path / "state.db", gateway=driver.gateway_config())
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime, [driver.adapter()])
            scheduler = JobScheduler(
                runner, runtime.store.jobs, config, clock=lambda: time.time() + offset[0]
            )
            await runner.start()
            try:
                await driver.say("alice", "/remind in 10m stretch")
                await wait_until(
                    lambda: any("Reminder #1" in r for r in driver.replies("alice")),
                    what="the confirmation",
                )
                llm.script(Turn(text="🧘 Time to stretch."))
                offset[0] = 10 * 60 + 1
                assert await scheduler.tick() == 1
                await scheduler.wait_idle()
                await wait_until(
                    lambda: "🧘 Time to stretch." in driver.replies("alice"), what="the reminder"
                )
                assert await scheduler.tick() == 0
            finally:
                await scheduler.stop(timeout_s=5)
                await runner.stop()
    assert driver.replies("alice").count("🧘 Time to stretch.") == 1
