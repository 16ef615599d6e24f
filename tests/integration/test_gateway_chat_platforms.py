"""End to end: real python-telegram-bot and discord.py against their fakes, the runner, a real
Runtime on FakeLLM and SQLite. Each behaviour runs on both platforms."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.fakes.discord import FakeDiscord, patch_discord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import make_config, request_texts, start_runtime, summary_responder
from tests.gateway.platform_drivers import (
    DiscordDriver,
    PlatformDriver,
    TelegramDriver,
    wait_until,
)

__all__ = ["patch_discord"]  # the fixture, imported so pytest finds it

Gateway = Callable[..., Any]


@pytest.fixture
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture(params=["telegram", "discord"])
def driver(request: pytest.FixtureRequest) -> PlatformDriver:
    """A running platform fake wrapped in its driver."""
    if request.param == "telegram":
        return TelegramDriver(request.getfixturevalue("fake_telegram"))
    fake: FakeDiscord = request.getfixturevalue("patch_discord")
    return DiscordDriver(fake)


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


@pytest.fixture
def gateway(
    driver: PlatformDriver, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Gateway:
    """`async with gateway(**config_sections)`: runtime + runner + the platform's adapter."""

    @asynccontextmanager
    async def running(**sections: Any) -> AsyncIterator[GatewayRunner]:
        platform = {**driver.gateway_config(), **sections.pop("gateway", {})}
        config = make_config(llm, tmp_path / "state.db", gateway=platform, **sections)
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime, [driver.adapter()])
            await runner.start()
            try:
                yield runner
            finally:
                await runner.stop()

    return running


async def _reply(driver: PlatformDriver, person: Any, count: int, ends_with: str = "") -> list[str]:
    def ready() -> bool:
        replies = driver.replies(person)
        return len(replies) >= count and replies[count - 1].endswith(ends_with)

    await wait_until(ready, what=f"{count} repl(ies) to {person} ending {ends_with!r}")
    return driver.replies(person)


async def test_message_gets_the_model_reply(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """A message from an allowlisted person is answered with the model's reply in their chat."""
    llm.script(Turn(text="Hi Alice, nice to meet you."))
    async with gateway():
        await driver.say("alice", "hello")
        replies = await _reply(driver, "alice", 1, "meet you.")
    assert replies == ["Hi Alice, nice to meet you."]
    assert request_texts(llm.requests[0].json)[-1] == "hello"


async def test_long_reply_is_split_at_the_platform_limit(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """A reply longer than one message arrives as several, each within the limit, nothing lost."""
    paragraph = ("word " * (driver.max_chars // 10)).strip()
    text = "\n\n".join(f"{n} {paragraph}" for n in range(5))
    llm.script(Turn(text=text))
    async with gateway():
        await driver.say("alice", "tell me a lot")
        await _reply(driver, "alice", 3, "word")
        await wait_until(
            lambda: (
                "".join(driver.replies("alice")).replace("\n", "").count("word")
                == text.count("word")
            ),
            what="every piece",
        )
        replies = driver.replies("alice")
    assert len(replies) >= 3
    assert all(len(r) <= driver.max_chars for r in replies)
    assert "\n\n".join(replies) == text  # cut on paragraph boundaries, in order


async def test_message_sent_mid_turn_is_answered_after_in_order(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """A second message during a slow turn is queued; answers come in order, the second knowing the first."""
    llm.script(Turn(text="answer one", delay_s=0.4), Turn(text="answer two"))
    async with gateway():
        await driver.say("alice", "question one")
        await llm.wait_requests(1)
        await driver.say("alice", "question two")
        replies = await _reply(driver, "alice", 2, "two")
    assert replies == ["answer one", "answer two"]
    assert request_texts(llm.requests[1].json)[-3:] == [
        "question one",
        "answer one",
        "question two",
    ]


async def test_two_chats_in_parallel_do_not_leak_context(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """Two chats' turns overlap in time, and each model request holds only its own chat's words."""
    llm.responder = lambda body, api: Turn(text="noted", delay_s=0.3)
    async with gateway():
        await driver.say("alice", "alice's secret")
        await driver.say("bob", "bob's secret")
        await llm.wait_requests(2)
        assert driver.replies("alice") == [] and driver.replies("bob") == []  # both in flight
        await _reply(driver, "alice", 1, "noted")
        await _reply(driver, "bob", 1, "noted")
    for recorded in llm.requests:
        texts = request_texts(recorded.json)
        assert ("alice's secret" in texts) != ("bob's secret" in texts)


async def test_unknown_user_is_refused(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """Someone not on the allowlist is told so, with their id, in a direct chat (the Telegram
    driver's stranger); in a group (the Discord driver's guild channel) nothing at all is
    posted about them. The model never hears them either way."""
    async with gateway():
        await driver.say("stranger", "let me in")
        if driver.platform == "telegram":
            replies = await _reply(driver, "stranger", 1)
            assert "allowlist" in replies[0]
        else:  # one channel, delivered in order: once Bob is answered, the stranger was handled
            await driver.say("bob", "after the stranger")
            await _reply(driver, "bob", 1)
            assert driver.replies("stranger") == []
    assert not any("let me in" in request_texts(r.json) for r in llm.requests)


async def test_new_compress_and_status_commands(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """/status reports the model, /compress compacts, /new starts over without the old context."""
    llm.responder = summary_responder()
    sections = {
        "model": {"context_length": 4000},
        "compression": {"protect_first_n": 1, "protect_last_n": 2},
    }
    async with gateway(**sections):
        for n in range(4):
            await driver.say("alice", f"note {n} " + "words " * 100)
            await _reply(driver, "alice", n + 1, "words")
        await driver.say("alice", "/status")
        status = (await _reply(driver, "alice", 5))[4]
        await driver.say("alice", "/compress")
        compressed = (await _reply(driver, "alice", 6))[5]
        await driver.say("alice", "/new")
        started = (await _reply(driver, "alice", 7))[6]
        await driver.say("alice", "fresh start")
        await _reply(driver, "alice", 8, "fresh start")
    assert "model test-model" in status and "tokens of 4,000" in status
    assert compressed.startswith("Compacted:")
    assert started.startswith("Started a new session")
    assert not any("note 0" in t for t in request_texts(llm.requests[-1].json))


async def test_restart_resumes_the_session(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """After a restart (new runtime, runner and adapter on the same database) the chat continues."""
    async with gateway():
        await driver.say("alice", "my name is Ada")
        await _reply(driver, "alice", 1)
    async with gateway():
        await driver.say("alice", "what is my name?")
        await _reply(driver, "alice", 2, "what is my name?")
    texts = request_texts(llm.requests[-1].json)
    assert texts[-3:] == ["my name is Ada", "echo: my name is Ada", "what is my name?"]


async def test_sessions_title_and_resume_commands(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """/title names the session, /new starts another, /sessions lists both (the current one
    marked), /resume goes back by the end of its id, and the old context returns."""
    async with gateway():
        await driver.say("alice", "my name is Ada")
        await _reply(driver, "alice", 1, "Ada")
        await driver.say("alice", "/title About Ada")
        titled = (await _reply(driver, "alice", 2))[1]
        await driver.say("alice", "/new")
        started = (await _reply(driver, "alice", 3))[2]
        await driver.say("alice", "something else")
        await _reply(driver, "alice", 4, "else")
        await driver.say("alice", "/sessions")
        listing = (await _reply(driver, "alice", 5))[4]
        first = titled.split()[1]
        await driver.say("alice", f"/resume {first[-8:]}")
        resumed = (await _reply(driver, "alice", 6))[5]
        await driver.say("alice", "what is my name?")
        await _reply(driver, "alice", 7, "name?")
    assert titled == f"Session {first} is now called “About Ada”."
    second = started.split("(")[1].split(")")[0]
    assert f"→ {second}" in listing and f"{first}  “About Ada”" in listing
    assert resumed.startswith(f"Resumed session {first} “About Ada”")
    texts = request_texts(llm.requests[-1].json)
    assert "my name is Ada" in texts and "something else" not in texts


async def test_resume_refuses_another_chats_session_and_unknown_commands_stay_local(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """Bob cannot /resume Alice's session by its id; a mistyped command gets the close match
    and never reaches the model."""
    async with gateway():
        await driver.say("alice", "alice's private words")
        await _reply(driver, "alice", 1, "words")
        await driver.say("alice", "/sessions")
        listing = (await _reply(driver, "alice", 2))[1]
        alices = listing.splitlines()[1].split()[1]
        await driver.say("bob", f"/resume {alices}")
        refused = (await _reply(driver, "bob", 1))[0]
        await driver.say("bob", "/sesions")
        unknown = (await _reply(driver, "bob", 2))[1]
    assert refused == f"No session {alices!r} in this chat; /sessions lists them."
    assert unknown == "Unknown command /sesions. Did you mean /sessions? /help lists the commands."
    assert len(llm.requests) == 1
