"""DiscordAdapter: pure inbound rules, and the real discord.py against the loopback FakeDiscord."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import discord
import pytest
import structlog.testing

from agent.errors import PlatformError, PlatformRateLimited, RecipientGone
from gateway.platforms.base import ChatRef, InboundMessage, PlatformAdapter
from gateway.platforms.discord import (
    DiscordAdapter,
    DiscordMessageFacts,
    error_for_status,
    inbound_from_message,
    reconnect_delay_s,
    strip_bot_mention,
)
from tests.fakes.discord import MESSAGE_CONTENT_INTENT, FakeDiscord, patch_discord

__all__ = ["patch_discord"]  # the fixture: exported so the import counts as used (ruff F401/F811)

BOT = "100"
HUMAN = "200"
MEMBERS_INTENT = 1 << 1


def _facts(**overrides: Any) -> DiscordMessageFacts:
    values: dict[str, Any] = {
        "message_id": "900",
        "channel_id": "300",
        "guild_id": "1",
        "parent_channel_id": None,
        "author_id": HUMAN,
        "author_name": "ada",
        "author_is_bot": False,
        "content": "hello",
        "mentioned_user_ids": frozenset(),
    }
    return DiscordMessageFacts(**(values | overrides))


def _guild_ref(chat_id: str, thread_id: str | None = None) -> ChatRef:
    return ChatRef(
        platform="discord", chat_id=chat_id, thread_id=thread_id, reply_to_message_id="900"
    )


@pytest.mark.parametrize(
    ("overrides", "expected_chat", "expected_text"),
    [
        pytest.param(
            {"guild_id": None}, ChatRef(platform="discord", chat_id="300"), "hello", id="dm"
        ),
        pytest.param({}, None, None, id="guild-unmentioned"),
        pytest.param(
            {"content": f"<@{BOT}> hi there", "mentioned_user_ids": frozenset({BOT})},
            _guild_ref("300"),
            "hi there",
            id="guild-mentioned",
        ),
        pytest.param({"channel_id": "555"}, _guild_ref("555"), "hello", id="configured-channel"),
        pytest.param(
            {"channel_id": "700", "parent_channel_id": "555"},
            _guild_ref("555", "700"),
            "hello",
            id="thread-of-configured-channel",
        ),
        pytest.param(
            {
                "channel_id": "700",
                "parent_channel_id": "300",
                "content": f"<@!{BOT}>: go",
                "mentioned_user_ids": frozenset({BOT}),
            },
            _guild_ref("300", "700"),
            "go",
            id="thread-mentioned",
        ),
        pytest.param(
            {"channel_id": "700", "parent_channel_id": "300"}, None, None, id="thread-unmentioned"
        ),
        pytest.param({"guild_id": None, "author_id": BOT}, None, None, id="own-message"),
        pytest.param(
            {"guild_id": None, "author_is_bot": True, "author_id": "999"},
            None,
            None,
            id="other-bot",
        ),
        pytest.param(
            {"content": f"<@{BOT}>", "mentioned_user_ids": frozenset({BOT})},
            None,
            None,
            id="mention-only",
        ),
        pytest.param(
            {"content": "hi <@42>", "mentioned_user_ids": frozenset({"42"})},
            None,
            None,
            id="someone-else-mentioned",
        ),
    ],
)
def test_inbound_from_message(
    overrides: dict[str, Any], expected_chat: ChatRef | None, expected_text: str | None
) -> None:
    """Only DMs, mentions and configured channels reach the runner; threads keep their parent."""
    inbound = inbound_from_message(
        _facts(**overrides), bot_user_id=BOT, channels=frozenset({"555"})
    )
    if expected_chat is None:
        assert inbound is None
        return
    assert inbound is not None
    assert (inbound.chat, inbound.text, inbound.user_id) == (
        expected_chat,
        expected_text,
        overrides.get("author_id", HUMAN),
    )
    assert inbound.is_direct is (overrides.get("guild_id", "1") is None)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (f"<@{BOT}> hello", "hello"),
        (f"<@!{BOT}>, what now?", "what now?"),
        (f"tell me <@{BOT}> a joke", "tell me a joke"),
        (f"ping <@{BOT}>", "ping"),
        ("hi <@42>", "hi <@42>"),
        (f"<@{BOT}>\nline one\n\nline two", "line one\n\nline two"),
    ],
)
def test_strip_bot_mention(content: str, expected: str) -> None:
    """The bot's own mention disappears; other mentions and line structure stay."""
    assert strip_bot_mention(content, BOT) == expected


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, PlatformRateLimited),
        (403, RecipientGone),
        (404, RecipientGone),
        (400, PlatformError),
        (500, PlatformError),
    ],
)
def test_error_for_status(status: int, kind: type[PlatformError]) -> None:
    """HTTP statuses map to the runtime's platform error kinds."""
    error = error_for_status(status, chat_id="5", detail="x", retry_after_s=2.5)
    assert type(error) is kind
    assert error.chat_id == "5"
    if kind is PlatformRateLimited:
        assert isinstance(error, PlatformRateLimited) and error.retry_after_s == 2.5


def test_adapter_satisfies_protocol() -> None:
    """DiscordAdapter is a PlatformAdapter with Discord's limits."""
    adapter = DiscordAdapter(token="t")
    assert isinstance(adapter, PlatformAdapter)
    assert (adapter.name, adapter.max_message_chars, adapter.min_edit_interval_s) == (
        "discord",
        2000,
        1.0,
    )


# --- the real discord.py against FakeDiscord ---------------------------------------------


@asynccontextmanager
async def running(
    fake: FakeDiscord,
    *,
    token: str | None = None,
    heartbeat_timeout_s: float = 5.0,
    reconnect_base_s: float = 1.0,
) -> AsyncIterator[tuple[DiscordAdapter, asyncio.Queue[InboundMessage]]]:
    """A started adapter whose deliver() only enqueues, stopped on exit."""
    inbox: asyncio.Queue[InboundMessage] = asyncio.Queue()
    adapter = DiscordAdapter(
        token=token or fake.token,
        channels=[str(fake.random_id)],
        guild_ready_timeout_s=0.05,
        heartbeat_timeout_s=heartbeat_timeout_s,
        start_timeout_s=5.0,
        request_timeout_s=5.0,
        reconnect_base_s=reconnect_base_s,
    )
    await adapter.start(inbox.put)
    try:
        yield adapter, inbox
    finally:
        await adapter.stop()


async def _never_called(inbound: InboundMessage) -> None:
    raise AssertionError(f"nothing should be delivered, got {inbound!r}")


async def next_inbound(inbox: asyncio.Queue[InboundMessage]) -> InboundMessage:
    async with asyncio.timeout(5.0):
        return await inbox.get()


@pytest.fixture
def discord_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """discord.py's own log, so silent parser errors and reconnect loops show up."""
    caplog.set_level(logging.INFO, logger="discord")
    return caplog


def assert_no_discord_errors(caplog: pytest.LogCaptureFixture) -> None:
    errors = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("discord") and r.levelno >= logging.ERROR
    ]
    assert errors == []


async def test_start_identifies_with_message_content_and_dm_reaches_deliver(
    patch_discord: FakeDiscord, discord_log: pytest.LogCaptureFixture
) -> None:
    """start() returns once READY, identifies with message_content (not members), and a DM is delivered."""
    fake = patch_discord
    async with running(fake) as (_, inbox):
        intents = int(fake.identifies[0]["intents"])
        assert intents & MESSAGE_CONTENT_INTENT and not intents & MEMBERS_INTENT
        sent = await fake.user_says("hello bot", channel_id=fake.dm_id)
        inbound = await next_inbound(inbox)
    assert inbound.chat == ChatRef(platform="discord", chat_id=str(fake.dm_id))
    assert (inbound.text, inbound.user_id, inbound.is_direct) == (
        "hello bot",
        str(fake.human_id),
        True,
    )
    assert (inbound.message_id, inbound.user_name) == (sent["id"], "ada")
    assert fake.connections == 1
    assert_no_discord_errors(discord_log)


async def test_guild_messages_need_a_mention_or_a_configured_channel(
    patch_discord: FakeDiscord, discord_log: pytest.LogCaptureFixture
) -> None:
    """Unmentioned guild chatter and bots are ignored; a mention (stripped) and a configured channel are not."""
    fake = patch_discord
    async with running(fake) as (_, inbox):
        await fake.user_says("just chatting", channel_id=fake.general_id)
        await fake.user_says(
            f"<@{fake.bot_id}> I am a bot",
            channel_id=fake.general_id,
            author_id=fake.other_bot_id,
            is_bot_author=True,
        )
        mentioned = await fake.user_says(
            f"<@{fake.bot_id}> what time is it?", channel_id=fake.general_id
        )
        first = await next_inbound(inbox)
        await fake.user_says("no mention needed here", channel_id=fake.random_id)
        second = await next_inbound(inbox)
        assert inbox.empty()
    assert first.chat == ChatRef(
        platform="discord", chat_id=str(fake.general_id), reply_to_message_id=mentioned["id"]
    )
    assert (first.text, first.is_direct) == ("what time is it?", False)
    assert (second.chat.chat_id, second.text) == (str(fake.random_id), "no mention needed here")
    assert fake.connections == 1
    assert_no_discord_errors(discord_log)


async def test_thread_message_and_reply_land_in_the_thread(
    patch_discord: FakeDiscord, discord_log: pytest.LogCaptureFixture
) -> None:
    """A thread message names its parent and thread, and the reply is posted into the thread."""
    fake = patch_discord
    async with running(fake) as (adapter, inbox):
        asked = await fake.user_says(f"<@{fake.bot_id}> summarise", channel_id=fake.thread_id)
        inbound = await next_inbound(inbox)
        reply_id = await adapter.send(inbound.chat, "here is the summary")
    assert inbound.chat == ChatRef(
        platform="discord",
        chat_id=str(fake.general_id),
        thread_id=str(fake.thread_id),
        reply_to_message_id=asked["id"],
    )
    reply = fake.messages[int(reply_id)]
    assert (reply["channel_id"], reply["content"]) == (str(fake.thread_id), "here is the summary")
    assert reply["message_reference"]["message_id"] == asked["id"]
    assert fake.connections == 1
    assert_no_discord_errors(discord_log)


async def test_send_edit_and_typing_make_the_expected_rest_calls(
    patch_discord: FakeDiscord, discord_log: pytest.LogCaptureFixture
) -> None:
    """send posts (with a reply reference), edit patches that message, typing posts /typing."""
    fake = patch_discord
    async with running(fake) as (adapter, inbox):
        await fake.user_says("hi", channel_id=fake.random_id)
        chat = (await next_inbound(inbox)).chat
        fake.rest_calls.clear()
        await adapter.typing(chat)
        message_id = await adapter.send(chat, "draft")
        await adapter.edit(chat, message_id, "final answer")
    channel = f"/channels/{fake.random_id}"
    assert [(c.method, c.path) for c in fake.rest_calls] == [
        ("POST", f"{channel}/typing"),
        ("POST", f"{channel}/messages"),
        ("PATCH", f"{channel}/messages/{message_id}"),
    ]
    assert (
        str(fake.rest_calls[1].body["message_reference"]["message_id"]) == chat.reply_to_message_id
    )
    assert fake.rest_calls[1].body["allowed_mentions"]["parse"] == []
    assert fake.messages[int(message_id)]["content"] == "final answer"
    assert_no_discord_errors(discord_log)


async def test_send_refuses_text_over_2000_chars_without_calling_discord(
    patch_discord: FakeDiscord,
) -> None:
    """A message longer than 2,000 characters is a caller bug: ValueError, nothing sent."""
    fake = patch_discord
    async with running(fake) as (adapter, _):
        fake.rest_calls.clear()
        with pytest.raises(ValueError, match="2000"):
            await adapter.send(
                ChatRef(platform="discord", chat_id=str(fake.general_id)), "x" * 2001
            )
        assert await adapter.send(
            ChatRef(platform="discord", chat_id=str(fake.general_id)), "y" * 2000
        )
    assert [c.method for c in fake.rest_calls] == ["POST"]


@pytest.mark.parametrize(
    ("headers", "expected_retry_after_s", "library_error"),
    [
        pytest.param(
            {"Via": "1.1 google", "Retry-After": "120"},
            120.0,
            discord.RateLimited,
            id="bucket-limit-over-max-wait",
        ),
        pytest.param({"Retry-After": "7"}, 7.0, discord.HTTPException, id="edge-limit-without-via"),
    ],
)
async def test_rate_limit_becomes_platform_rate_limited(
    patch_discord: FakeDiscord,
    headers: dict[str, str],
    expected_retry_after_s: float,
    library_error: type[Exception],
) -> None:
    """A 429 Discord will not let the library wait out surfaces as PlatformRateLimited with its delay."""
    fake = patch_discord
    chat = ChatRef(platform="discord", chat_id=str(fake.general_id))
    async with running(fake) as (adapter, _):
        body = {
            "message": "You are being rate limited.",
            "retry_after": expected_retry_after_s,
            "global": False,
        }
        fake.fail_next_rest(429, body, headers)
        started = time.monotonic()
        with pytest.raises(PlatformRateLimited) as caught:
            await adapter.send(chat, "hello")
        assert time.monotonic() - started < 2.0
    assert caught.value.retry_after_s == expected_retry_after_s
    assert type(caught.value.__cause__) is library_error
    assert caught.value.chat_id == str(fake.general_id)


async def test_unknown_channel_becomes_recipient_gone(patch_discord: FakeDiscord) -> None:
    """Posting to a channel Discord does not know raises RecipientGone."""
    async with running(patch_discord) as (adapter, _):
        with pytest.raises(RecipientGone):
            await adapter.send(ChatRef(platform="discord", chat_id="123456789"), "anyone?")


@pytest.mark.parametrize("how", ["zombie-heartbeats", "socket-closed-4000"])
async def test_bot_still_hears_messages_after_a_gateway_reconnect(
    patch_discord: FakeDiscord, discord_log: pytest.LogCaptureFixture, how: str
) -> None:
    """After the gateway drops (unanswered heartbeats or a resumable close) the client RESUMEs and still hears."""
    fake = patch_discord
    async with running(fake, heartbeat_timeout_s=0.3) as (_, inbox):
        if how == "zombie-heartbeats":
            fake.stop_acking()
        else:
            await fake.drop_connection(4000)
        await fake.wait_resumed(1)
        await fake.user_says("are you still there?", channel_id=fake.dm_id)
        inbound = await next_inbound(inbox)
    assert inbound.text == "are you still there?"
    assert (fake.connections, len(fake.identifies), len(fake.resumes)) == (2, 1, 1)
    assert fake.resumes[0]["session_id"] == "session-1"
    assert_no_discord_errors(discord_log)


@pytest.mark.parametrize("code", [4004, 4010])
async def test_gateway_lost_for_good_is_logged_then_rebuilt_and_hears_again(
    patch_discord: FakeDiscord, code: int
) -> None:
    """A non-resumable close after start is logged, then a fresh client identifies and still hears."""
    fake = patch_discord
    with structlog.testing.capture_logs() as events:
        async with running(fake, reconnect_base_s=0.05) as (adapter, inbox):
            task = adapter._connect_task
            assert task is not None
            await fake.drop_connection(code)
            await asyncio.wait_for(asyncio.wait({task}), timeout=5.0)
            reconnect = adapter._reconnect_task  # started by the dead task's done callback
            assert reconnect is not None
            await asyncio.wait_for(reconnect, timeout=5.0)  # READY on a fresh client
            assert adapter.reconnects == 1
            await fake.user_says("can you hear me now?", channel_id=fake.dm_id)
            inbound = await next_inbound(inbox)
    assert len(fake.identifies) == 2
    assert inbound.text == "can you hear me now?"
    failures = [e for e in events if e["event"] == "discord_gateway_failed"]
    assert [(e["log_level"], e["error"]) for e in failures] == [("error", "ConnectionClosed")]
    assert [e["event"] for e in events].count("discord_reconnected") == 1
    assert fake.connections == 2


@pytest.mark.parametrize(
    ("attempt", "expected"), [(1, 0.5), (2, 1.0), (3, 2.0), (7, 30.0), (50, 30.0)]
)
def test_reconnect_delay_doubles_up_to_a_cap(attempt: int, expected: float) -> None:
    """Reconnect waits double from the base and never exceed the cap."""
    assert reconnect_delay_s(attempt, base_s=0.5, max_s=30.0) == expected


async def test_bad_token_is_a_clear_error_without_the_token(patch_discord: FakeDiscord) -> None:
    """A rejected token fails start() with a message naming gateway.discord.token, never the token."""
    fake = patch_discord
    secret = "not-the-right-token-abc123"
    adapter = DiscordAdapter(token=secret, guild_ready_timeout_s=0.05, start_timeout_s=5.0)
    with pytest.raises(PlatformError) as caught:
        await adapter.start(_never_called)
    assert "gateway.discord.token" in str(caught.value)
    assert secret not in str(caught.value)
    assert isinstance(caught.value.__cause__, discord.LoginFailure)
    assert fake.connections == 0
    await adapter.stop()


async def test_missing_privileged_intent_tells_the_operator_what_to_enable(
    patch_discord: FakeDiscord,
) -> None:
    """When the portal has Message Content off, start() fails (4014) and says to enable that intent."""
    fake = patch_discord
    fake.enabled_intents = 0
    adapter = DiscordAdapter(token=fake.token, guild_ready_timeout_s=0.05, start_timeout_s=5.0)
    with pytest.raises(PlatformError) as caught:
        await adapter.start(_never_called)
    assert "Message Content Intent" in str(caught.value)
    assert "developer portal" in str(caught.value)
    assert isinstance(caught.value.__cause__, discord.PrivilegedIntentsRequired)
    assert (fake.connections, fake.identifies) == (1, [])


async def test_gateway_that_never_gets_ready_fails_start_within_its_timeout(
    patch_discord: FakeDiscord,
) -> None:
    """If READY never comes, start() gives up after start_timeout_s and leaves nothing running."""
    fake = patch_discord
    fake.is_answering_identify = False
    adapter = DiscordAdapter(token=fake.token, guild_ready_timeout_s=0.05, start_timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(PlatformError, match="not ready within 0.3s"):
        await adapter.start(_never_called)
    assert time.monotonic() - started < 1.5
    await fake.wait_for(lambda: not fake._sockets, what="the socket to close", timeout_s=2.0)
    assert fake.connections == 1


async def test_stop_closes_the_gateway_quickly(patch_discord: FakeDiscord) -> None:
    """stop() closes the socket well within a second, and the fake sees no live connection after."""
    fake = patch_discord
    async with running(fake) as (adapter, _):
        started = time.monotonic()
    elapsed = time.monotonic() - started
    await fake.wait_for(lambda: not fake._sockets, what="the socket to close", timeout_s=2.0)
    assert elapsed < 1.0
    assert fake.connections == 1
