"""Group chats end to end (issue 24): real python-telegram-bot and discord.py against their fakes,
the runner, a real Runtime on FakeLLM and SQLite.

In a group the bot answers only what is addressed to it (Telegram: a command, an @mention, a
reply to the bot; Discord: a mention or a reply to the bot), and a member who is not allowed
causes no public message at all (their id is nobody else's business). Telegram `/start`, the
first thing every Telegram user sends, is a greeting with the command list, never "Unknown
command". Contracts: Bot API "Message" (`entities`, `reply_to_message`) and "MessageEntity"
(`mention`, `bot_command`); Discord API "Message Object" (`mentions`, type 19 replies with
`message_reference` and `referenced_message`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.commands import GREETING
from gateway.platforms.discord import DiscordAdapter
from gateway.platforms.telegram import TelegramAdapter
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM
from tests.fakes.discord import FakeDiscord, patch_discord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import make_config, request_texts, start_runtime
from tests.gateway.platform_drivers import wait_until

__all__ = ["patch_discord"]  # the fixture, imported so pytest finds it

GROUP, MEMBER, STRANGER = -100, 111, 999
BOT = "@hermes_test_bot"


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


@asynccontextmanager
async def running(
    llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    adapter: Any,
    gateway: dict[str, Any],
) -> AsyncIterator[GatewayRunner]:
    config = make_config(llm, tmp_path / "state.db", gateway=gateway)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime, [adapter])
        await runner.start()
        try:
            yield runner
        finally:
            await runner.stop()


def _said_to_model(llm: FakeLLM) -> str:
    return "\n".join(t for r in llm.requests for t in request_texts(r.json))


# -- Telegram -------------------------------------------------------------------------------------


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


def _telegram_adapter(fake: FakeTelegram) -> TelegramAdapter:
    return TelegramAdapter(
        token=fake.token, base_url=fake.base_url, poll_timeout_s=1.0, request_timeout_s=3.0
    )


def _final(fake: FakeTelegram, chat_id: int) -> list[str]:
    """What the chat shows: each message the bot sent there, as last edited (replies stream)."""
    final = {m.message_id: m.text for m in fake.sent if m.chat_id == chat_id}
    for edited_chat, message_id, text in fake.edits:
        if edited_chat == chat_id:
            final[message_id] = text
    return [final[k] for k in sorted(final)]


def _in_group(fake: FakeTelegram) -> list[str]:
    return _final(fake, GROUP)


async def _shows(fake: FakeTelegram, chat_id: int, *texts: str) -> None:
    await wait_until(lambda: _final(fake, chat_id) == list(texts), what=f"{texts} in {chat_id}")


async def test_telegram_group_answers_only_what_is_addressed(
    telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unaddressed group message is ignored (no reply, the model never hears it); a mention,
    a reply to the bot's message and a command are each answered, in the group."""
    gateway = {"telegram": {"allowed_users": [str(MEMBER)]}}
    async with running(llm, tmp_path, monkeypatch, _telegram_adapter(telegram), gateway):
        await telegram.push_text(GROUP, MEMBER, "chatting among ourselves", chat_type="supergroup")
        await telegram.push_text(GROUP, MEMBER, f"{BOT} what is 2+2?", chat_type="supergroup")
        await _shows(telegram, GROUP, "echo: what is 2+2?")
        answer = next(m for m in telegram.sent if m.chat_id == GROUP)
        await telegram.push_text(
            GROUP, MEMBER, "and times 3?", chat_type="supergroup", reply_to=answer.message_id
        )
        await _shows(telegram, GROUP, "echo: what is 2+2?", "echo: and times 3?")
        await telegram.push_text(GROUP, MEMBER, "/help", chat_type="supergroup")
        await wait_until(lambda: len(_in_group(telegram)) == 3, what="the answer to /help")
    assert _in_group(telegram)[2].startswith("Commands:")
    assert "chatting among ourselves" not in _said_to_model(llm)
    assert len(llm.requests) == 2


async def test_telegram_group_says_nothing_about_a_stranger(
    telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member who is not allowed mentions the bot in the group: nothing is posted there (no
    refusal, no id), the model never hears them; in their direct chat they get the refusal
    naming their id (what the operator must add)."""
    gateway = {"telegram": {"allowed_users": [str(MEMBER)]}}
    async with running(llm, tmp_path, monkeypatch, _telegram_adapter(telegram), gateway):
        await telegram.push_text(GROUP, STRANGER, f"{BOT} let me in", chat_type="supergroup")
        await telegram.push_text(GROUP, MEMBER, f"{BOT} hello", chat_type="supergroup")
        await _shows(telegram, GROUP, "echo: hello")
        await telegram.push_text(STRANGER, STRANGER, "let me in")
        await wait_until(lambda: len(_final(telegram, STRANGER)) == 1, what="the refusal")
    assert _in_group(telegram) == ["echo: hello"]
    [refusal] = _final(telegram, STRANGER)
    assert "allowlist" in refusal and str(STRANGER) in refusal
    assert "let me in" not in _said_to_model(llm)


async def test_telegram_start_greets_with_the_command_list(
    telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/start` from an allowed user is a greeting and the command list (the same table as
    /help and the command menu), never "Unknown command" and never the model; from a user not
    yet allowed, the refusal with their id."""
    gateway = {"telegram": {"allowed_users": [str(MEMBER)]}}
    async with running(llm, tmp_path, monkeypatch, _telegram_adapter(telegram), gateway):
        await telegram.push_text(MEMBER, MEMBER, "/start")
        await telegram.push_text(STRANGER, STRANGER, "/start")
        await wait_until(lambda: len(telegram.sent) == 2, what="both answers to /start")
    [greeting] = [m.text for m in telegram.sent if m.chat_id == MEMBER]
    [refusal] = [m.text for m in telegram.sent if m.chat_id == STRANGER]
    assert greeting.startswith(GREETING) and "/help" in greeting and "/new" in greeting
    assert "Unknown command" not in greeting
    assert "allowlist" in refusal and str(STRANGER) in refusal
    assert "start" in {c["command"] for c in telegram.commands()}
    assert llm.requests == []


# -- Discord --------------------------------------------------------------------------------------


def _bot_messages(fake: FakeDiscord, channel: int) -> list[dict[str, Any]]:
    bot = str(fake.bot_id)
    return sorted(
        (
            m
            for m in fake.messages.values()
            if m["channel_id"] == str(channel) and m["author"]["id"] == bot
        ),
        key=lambda m: int(m["id"]),
    )


async def _discord_shows(fake: FakeDiscord, channel: int, *texts: str) -> None:
    """Until the bot's messages in `channel` read `texts` (replies stream in as edits)."""
    await wait_until(
        lambda: [m["content"] for m in _bot_messages(fake, channel)] == list(texts),
        what=f"{texts} in {channel}",
    )


async def test_discord_channel_answers_only_mentions_and_replies_and_not_strangers(
    patch_discord: FakeDiscord, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a guild channel: an unaddressed message is ignored; a stranger's mention causes no
    message at all; a member's mention is answered, and so is a reply to the bot's answer."""
    fake = patch_discord
    channel = fake.general_id
    adapter = DiscordAdapter(
        token=fake.token, guild_ready_timeout_s=0.05, start_timeout_s=5.0, request_timeout_s=5.0
    )
    gateway = {"discord": {"allowed_users": [str(fake.human_id)]}}
    async with running(llm, tmp_path, monkeypatch, adapter, gateway):
        await fake.user_says("chatting among ourselves", channel_id=channel)
        await fake.user_says(f"<@{fake.bot_id}> let me in", channel_id=channel, author_id=STRANGER)
        await fake.user_says(f"<@{fake.bot_id}> what is 2+2?", channel_id=channel)
        await _discord_shows(fake, channel, "echo: what is 2+2?")
        answer = _bot_messages(fake, channel)[0]
        await fake.user_says("and times 3?", channel_id=channel, reply_to=int(answer["id"]))
        await _discord_shows(fake, channel, "echo: what is 2+2?", "echo: and times 3?")
    said = _said_to_model(llm)
    assert "chatting among ourselves" not in said and "let me in" not in said
