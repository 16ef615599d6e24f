"""TelegramAdapter: pure rules in tables, then the real python-telegram-bot against FakeTelegram."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from telegram import Update
from telegram.error import BadRequest, ChatMigrated, Forbidden, InvalidToken, RetryAfter, TimedOut

from agent.errors import ConfigError, PlatformError, PlatformRateLimited, RecipientGone
from gateway.platforms.base import ChatRef, GroupMode, InboundMessage, PlatformAdapter
from gateway.platforms.telegram import (
    TOKEN_REJECTED,
    TelegramAdapter,
    bot_urls,
    inbound_from_update,
    normalise_command,
    translate_error,
)
from tests.fakes.telegram import CONFLICT, FakeTelegram
from tests.waits import WAIT_S

BOT = "hermes_test_bot"


class _Inbox:
    """A `Deliver` that records what arrives; holds a chat id or a text until its gate opens."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.held: dict[str, asyncio.Event] = {}
        self._changed = asyncio.Condition()

    async def __call__(self, message: InboundMessage) -> None:
        gate = self.held.get(message.chat.chat_id) or self.held.get(message.text)
        if gate is not None:
            async with asyncio.timeout(WAIT_S):
                await gate.wait()
        async with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    async def wait_count(self, n: int) -> list[InboundMessage]:
        await self.wait_until(lambda: len(self.messages) >= n)
        return list(self.messages)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT_S), self._changed:
            await self._changed.wait_for(predicate)

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.messages]


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    """A running fake Bot API."""
    async with FakeTelegram(bot_username=BOT) as server:
        yield server


@pytest.fixture
async def make_adapter(
    fake: FakeTelegram,
) -> AsyncIterator[Callable[..., TelegramAdapter]]:
    """Build adapters pointed at the fake with tight timeouts; stop them all at the end."""
    made: list[TelegramAdapter] = []

    def build(**overrides: Any) -> TelegramAdapter:
        settings: dict[str, Any] = {
            "token": fake.token,
            "base_url": fake.base_url,
            "poll_timeout_s": 1.0,
            "request_timeout_s": 2.0,
        }
        adapter = TelegramAdapter(**(settings | overrides))
        made.append(adapter)
        return adapter

    yield build
    for adapter in made:
        await adapter.stop()


@pytest.fixture
async def running(
    make_adapter: Callable[..., TelegramAdapter],
) -> tuple[TelegramAdapter, _Inbox]:
    """A started adapter and the inbox it delivers to."""
    adapter, inbox = make_adapter(), _Inbox()
    await adapter.start(inbox)
    return adapter, inbox


def _update(body: dict[str, Any], update_id: int = 1) -> Update:
    update = Update.de_json({"update_id": update_id} | body, None)
    assert update is not None
    return update


def _message(
    text: str | None = "hi",
    *,
    chat_type: str = "private",
    chat_id: int = 42,
    user: dict[str, Any] | None = None,
    topic: int | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message_id": 7,
        "date": 1_700_000_000,
        "chat": {"id": chat_id, "type": chat_type},
        "from": user or {"id": 9, "is_bot": False, "first_name": "Al", "username": "al"},
    }
    if text is not None:
        body["text"] = text
        entities = [  # as the Bot API marks them (these tests' texts are ASCII)
            {"type": "mention", "offset": m.start(), "length": len(m[0])}
            for m in re.finditer(r"@[A-Za-z]\w{3,31}", text)
        ]
        if text.startswith("/"):
            entities.insert(0, {"type": "bot_command", "offset": 0, "length": len(text.split()[0])})
        if entities:
            body["entities"] = entities
    if topic is not None:
        body |= {"message_thread_id": topic, "is_topic_message": True}
    return body


# --- pure rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/new", "/new"),
        ("/new@hermes_test_bot", "/new"),
        ("/New@Hermes_Test_Bot", "/new"),
        ("/compress@hermes_test_bot keep the plan", "/compress keep the plan"),
        ("/model\ngpt-5", "/model\ngpt-5"),
        ("/new@other_bot", None),
        ("/usr/bin is a path", "/usr/bin is a path"),
        ("hello /new", "hello /new"),
        ("plain text", "plain text"),
    ],
)
def test_normalise_command(text: str, expected: str | None) -> None:
    """Commands lose their @bot suffix and case; commands for other bots are dropped."""
    assert normalise_command(text, BOT) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"message": _message("hi")},
            {"chat_id": "42", "thread_id": None, "reply_to": None, "direct": True, "text": "hi"},
        ),
        (
            {"message": _message("@hermes_test_bot hi all", chat_type="group", chat_id=-5)},
            {
                "chat_id": "-5",
                "thread_id": None,
                "reply_to": "7",
                "direct": False,
                "text": "hi all",
            },
        ),
        (
            {"message": _message("/new@hermes_test_bot", chat_type="supergroup", topic=3)},
            {"chat_id": "42", "thread_id": "3", "reply_to": "7", "direct": False, "text": "/new"},
        ),
    ],
)
def test_inbound_from_update_maps_chats(body: dict[str, Any], expected: dict[str, Any]) -> None:
    """Private chats are direct; groups reply to the message; forum topics carry a thread id."""
    inbound = inbound_from_update(_update(body), BOT)
    assert inbound is not None
    assert inbound.chat == ChatRef(
        platform="telegram",
        chat_id=expected["chat_id"],
        thread_id=expected["thread_id"],
        reply_to_message_id=expected["reply_to"],
    )
    assert (inbound.is_direct, inbound.text) == (expected["direct"], expected["text"])
    assert (inbound.user_id, inbound.user_name, inbound.message_id) == ("9", "al", "7")
    assert inbound.received_at == 1_700_000_000


def test_inbound_from_update_maps_an_edit_to_its_message() -> None:
    """Bot API `edited_message`: the same message (id, chat, sender) with new text and an
    `edit_date`; the gateway sees it flagged as an edit of message 7."""
    body = {"edited_message": _message("changed") | {"edit_date": 1_700_000_100}}
    inbound = inbound_from_update(_update(body), BOT)
    assert inbound is not None
    assert (inbound.text, inbound.message_id, inbound.edited) == ("changed", "7", True)
    fresh = inbound_from_update(_update({"message": _message("hi")}), BOT)
    assert fresh is not None and not fresh.edited


@pytest.mark.parametrize(
    "body",
    [
        {"channel_post": _message("news", chat_type="channel")},
        {"message": _message("beep", user={"id": 8, "is_bot": True, "first_name": "B"})},
        {"message": _message(None)},
        {"message": _message("/new@other_bot", chat_type="group")},
    ],
    ids=["channel", "bot", "no-text", "other-bot-command"],
)
def test_inbound_from_update_ignores(body: dict[str, Any]) -> None:
    """Edits, channel posts, bots, non-text and other bots' commands yield nothing."""
    assert inbound_from_update(_update(body), BOT) is None


BOT_ID = 7_000_000_001
_GROUP = {"chat_type": "supergroup", "chat_id": -100}
_BOT_USER = {"id": BOT_ID, "is_bot": True, "first_name": "Hermes", "username": BOT}


@pytest.mark.parametrize(
    ("message", "mode", "expected"),
    [
        (_message("what now?", **_GROUP), "mention", None),
        (_message("ask @other_bot", **_GROUP), "mention", None),
        (_message("@Hermes_Test_Bot, what now?", **_GROUP), "mention", "what now?"),
        (_message("so, @hermes_test_bot what now?", **_GROUP), "mention", "so, what now?"),
        (_message("@hermes_test_bot", **_GROUP), "mention", None),  # nothing left to answer
        (_message("/status", **_GROUP), "mention", "/status"),
        (_message("/status@hermes_test_bot", **_GROUP), "mention", "/status"),
        (
            _message("and then?", **_GROUP)
            | {"reply_to_message": _message("earlier", **_GROUP, user=_BOT_USER)},
            "mention",
            "and then?",
        ),
        (
            _message("and then?", **_GROUP)
            | {"reply_to_message": _message("a person's", **_GROUP)},
            "mention",
            None,
        ),
        (
            _message("hey Hermes", **_GROUP)
            | {"entities": [{"type": "text_mention", "offset": 4, "length": 6, "user": _BOT_USER}]},
            "mention",
            "hey Hermes",
        ),
        (_message("what now?", **_GROUP), "all", "what now?"),
        (_message("what now?"), "mention", "what now?"),  # a private chat is always for us
    ],
    ids=[
        "unaddressed",
        "other-bot",
        "mention",
        "mention-inside",
        "bare-mention",
        "command",
        "command-for-us",
        "reply-to-bot",
        "reply-to-person",
        "text-mention",
        "mode-all",
        "private",
    ],
)
def test_groups_answer_only_what_is_addressed(
    message: dict[str, Any], mode: GroupMode, expected: str | None
) -> None:
    """In a group the bot takes a message only when it is a command, mentions the bot, or
    replies to the bot (Bot API: MessageEntity `bot_command`, `mention`, `text_mention`;
    Message `reply_to_message`), its @name removed; with group mode "all", every message."""
    inbound = inbound_from_update(
        _update({"message": message}), BOT, bot_id=BOT_ID, group_mode=mode
    )
    assert (inbound.text if inbound is not None else None) == expected


def test_a_chats_own_group_mode_wins() -> None:
    """`group_chats` sets one chat's mode over the platform's `group_mode`, both ways."""
    body = {"message": _message("what now?", **_GROUP)}
    chats: dict[str, GroupMode] = {"-100": "all"}
    assert inbound_from_update(_update(body), BOT, group_chats=chats) is not None
    quiet: dict[str, GroupMode] = {"-100": "mention"}
    assert inbound_from_update(_update(body), BOT, group_mode="all", group_chats=quiet) is None


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("http://127.0.0.1:8081", ("http://127.0.0.1:8081/bot", "http://127.0.0.1:8081/file/bot")),
        (
            "http://127.0.0.1:8081/bot",
            ("http://127.0.0.1:8081/bot", "http://127.0.0.1:8081/file/bot"),
        ),
        (
            "https://tg.example/api/bot/",
            ("https://tg.example/api/bot", "https://tg.example/api/file/bot"),
        ),
    ],
)
def test_bot_urls(base_url: str, expected: tuple[str, str]) -> None:
    """A server root or a '/bot' prefix both give PTB's API and file prefixes."""
    assert bot_urls(base_url) == expected


@pytest.mark.parametrize(
    ("exc", "is_edit", "kind", "detail"),
    [
        (RetryAfter(timedelta(seconds=7)), False, PlatformRateLimited, "flood control"),
        (Forbidden("Forbidden: bot was blocked by the user"), False, RecipientGone, "blocked"),
        (ChatMigrated(-100123), False, RecipientGone, "-100123"),
        (BadRequest("Bad Request: chat not found"), False, RecipientGone, "not found"),
        (BadRequest("Bad Request: message is not modified: same"), True, None, ""),
        (BadRequest("Bad Request: message is not modified: same"), False, PlatformError, "not"),
        (BadRequest("Bad Request: can't parse entities"), True, PlatformError, "parse"),
        (InvalidToken("The token `123:SECRET` was rejected"), False, PlatformError, "gateway"),
        (TimedOut(), False, PlatformError, "timed out"),
        (TimeoutError(), False, PlatformError, "timed out"),
    ],
)
def test_translate_error(exc: Exception, is_edit: bool, kind: type | None, detail: str) -> None:
    """Each PTB error becomes the runtime's kind; an unmodified edit is no error at all."""
    error = translate_error(exc, "42", is_edit=is_edit)  # type: ignore[arg-type]
    if kind is None:
        assert error is None
        return
    assert type(error) is kind
    assert detail.lower() in str(error).lower()
    assert "SECRET" not in str(error)


def test_retry_after_seconds_carried() -> None:
    """A flood-control error carries Telegram's retry_after in seconds."""
    error = translate_error(RetryAfter(12), "42")
    assert isinstance(error, PlatformRateLimited) and error.retry_after_s == 12.0


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"token": ""}, "gateway.telegram.token"),
        ({"token": "1:x", "mode": "webhook"}, "gateway.telegram.webhook_url"),
    ],
)
def test_bad_settings_refused_at_construction(settings: dict[str, Any], key: str) -> None:
    """Missing token or webhook URL is a ConfigError naming the key."""
    with pytest.raises(ConfigError) as caught:
        TelegramAdapter(**settings)
    assert caught.value.key == key


async def test_webhook_mode_receives_updates_and_refuses_forgeries(
    fake: FakeTelegram, make_adapter: Callable[..., TelegramAdapter]
) -> None:
    """Webhook mode registers its URL with a secret; Telegram's POSTs arrive, forged ones do not."""
    import socket

    with socket.socket() as probe:  # a free port for the webhook server
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    adapter = make_adapter(
        mode="webhook", webhook_url=f"http://127.0.0.1:{port}/tg-hook", webhook_port=port
    )
    inbox = _Inbox()
    await adapter.start(inbox)
    assert fake.webhook_url == f"http://127.0.0.1:{port}/tg-hook"
    forged = await fake.post_to_webhook(_message_body("forged"), secret="not-the-secret")
    assert forged == 403
    assert await fake.post_to_webhook(_message_body("hello via webhook")) == 200
    got = await inbox.wait_count(1)
    assert got[0].text == "hello via webhook" and got[0].chat.chat_id == "42"
    assert "getUpdates" not in fake.calls


async def test_webhook_works_behind_several_workers(
    fake: FakeTelegram, make_adapter: Callable[..., TelegramAdapter]
) -> None:
    """Two workers behind one webhook URL register the same secret, so an update the proxy
    hands to either worker is accepted (a random secret per worker would refuse one of them)."""
    import socket

    ports = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    public = f"http://127.0.0.1:{ports[0]}/tg-hook"
    inboxes = [_Inbox(), _Inbox()]
    for port, inbox in zip(ports, inboxes, strict=True):
        adapter = make_adapter(mode="webhook", webhook_url=public, webhook_port=port)
        await adapter.start(inbox)
    assert fake.webhook_url == public
    to_second = f"http://127.0.0.1:{ports[1]}/tg-hook"
    assert await fake.post_to_webhook(_message_body("via the first")) == 200
    assert await fake.post_to_webhook(_message_body("via the second"), url=to_second) == 200
    assert [m.text for m in await inboxes[0].wait_count(1)] == ["via the first"]
    assert [m.text for m in await inboxes[1].wait_count(1)] == ["via the second"]
    forged = await fake.post_to_webhook(_message_body("x"), secret="guess", url=to_second)
    assert forged == 403


async def test_a_second_poller_terminates_the_waiting_one_with_409(
    fake: FakeTelegram, make_adapter: Callable[..., TelegramAdapter]
) -> None:
    """The fake is as strict as the Bot API: a second getUpdates ends the waiting one with 409
    "Conflict: terminated by other getUpdates request" (two pollers are a misconfiguration)."""
    import aiohttp

    adapter = make_adapter(base_url=f"http://127.0.0.1:{fake.port}/first/bot")
    await adapter.start(_Inbox())
    await fake.wait_for(lambda: "first" in fake.poll_consumers, WAIT_S)
    url = f"http://127.0.0.1:{fake.port}/second/bot{fake.token}/getUpdates"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WAIT_S)) as http:
        async with http.post(url, json={"timeout": 0}) as response:
            assert response.status == 200
    await fake.wait_for(lambda: fake.conflicts == 1, WAIT_S)
    assert CONFLICT.startswith("Conflict: terminated by other getUpdates request")


def _message_body(text: str) -> dict[str, Any]:
    return {
        "message": {
            "message_id": 7,
            "date": int(time.time()),
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 9, "is_bot": False, "first_name": "Alice", "username": "alice"},
            "text": text,
        }
    }


# --- real PTB against the fake ---------------------------------------------------------------


async def test_adapter_satisfies_protocol(running: tuple[TelegramAdapter, _Inbox]) -> None:
    """The adapter is a PlatformAdapter with Telegram's limits."""
    adapter, _ = running
    assert isinstance(adapter, PlatformAdapter)
    assert (adapter.max_message_chars, adapter.min_edit_interval_s) == (4096, 1.0)


async def test_private_and_group_messages_delivered(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox]
) -> None:
    """Private, group and forum-topic messages reach deliver with the right ChatRef."""
    _, inbox = running
    await fake.push_text(42, 9, "hello")
    await fake.push_text(-100, 9, "/new@hermes_test_bot", chat_type="supergroup", username="bo")
    await fake.push_text(
        -200, 11, "@hermes_test_bot topic talk", chat_type="supergroup", thread_id=5
    )
    got = await inbox.wait_count(3)
    assert [(m.chat.chat_id, m.chat.thread_id, m.is_direct, m.text) for m in got] == [
        ("42", None, True, "hello"),
        ("-100", None, False, "/new"),
        ("-200", "5", False, "topic talk"),
    ]
    assert got[1].user_name == "bo" and got[2].user_id == "11"
    assert fake.calls[:4] == ["getMe", "setMyCommands", "deleteWebhook", "getUpdates"]


async def test_edits_delivered_and_bots_not(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox]
) -> None:
    """An edit arrives flagged as one (the poller asks for `edited_message`, and the fake
    delivers only the types asked for); bot senders are skipped; later messages still arrive."""
    _, inbox = running
    await fake.push_text(42, 9, "first")
    await fake.push_edit(fake.last_pushed_id, "changed")
    await fake.push_text(42, 77, "from a bot", is_bot=True)
    await fake.push_text(42, 9, "real")
    await inbox.wait_count(3)
    await fake.wait_for(lambda: not fake.pending_update_ids, WAIT_S)
    assert inbox.texts == ["first", "changed", "real"]
    assert [m.edited for m in inbox.messages] == [False, True, False]


async def test_send_edit_typing_reach_fake(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox]
) -> None:
    """send returns the id, edit replaces the text, typing is thread-aware; params are right."""
    adapter, inbox = running
    await fake.push_text(-300, 9, "@hermes_test_bot q", chat_type="supergroup", thread_id=8)
    [inbound] = await inbox.wait_count(1)
    message_id = await adapter.send(inbound.chat, "first draft")
    await adapter.edit(inbound.chat, message_id, "final answer")
    await adapter.edit(inbound.chat, message_id, "final answer")  # unchanged: ignored
    await adapter.typing(inbound.chat)
    [sent] = fake.sent
    assert (sent.chat_id, sent.text, sent.thread_id) == (-300, "first draft", 8)
    assert sent.reply_to_message_id == int(inbound.message_id or 0)
    assert message_id == str(sent.message_id)
    assert fake.edits == [(-300, sent.message_id, "final answer")]
    assert fake.chat_actions == [(-300, "typing", 8)]


async def test_send_refuses_long_text_without_calling(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox]
) -> None:
    """A text over 4096 characters raises ValueError and never reaches the API."""
    adapter, _ = running
    with pytest.raises(ValueError, match="4096"):
        await adapter.send(ChatRef(platform="telegram", chat_id="42"), "x" * 4097)
    assert "sendMessage" not in fake.calls


async def test_rate_limit_becomes_platform_rate_limited(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox]
) -> None:
    """A 429 with retry_after raises PlatformRateLimited carrying the wait; the next send works."""
    adapter, inbox = running
    await fake.push_text(42, 9, "hi")
    [inbound] = await inbox.wait_count(1)
    fake.inject_retry_after(3)
    with pytest.raises(PlatformRateLimited) as caught:
        await adapter.send(inbound.chat, "reply")
    assert caught.value.retry_after_s == 3.0 and caught.value.chat_id == "42"
    assert await adapter.send(inbound.chat, "reply")
    assert [s.text for s in fake.sent] == ["reply"]


async def test_blocked_and_unknown_chats_are_recipient_gone(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox]
) -> None:
    """403 from a blocked user and 400 'chat not found' both raise RecipientGone."""
    adapter, inbox = running
    await fake.push_text(42, 9, "hi")
    [inbound] = await inbox.wait_count(1)
    fake.block(42)
    with pytest.raises(RecipientGone):
        await adapter.send(inbound.chat, "reply")
    with pytest.raises(RecipientGone):
        await adapter.typing(ChatRef(platform="telegram", chat_id="999"))


async def test_restart_delivers_every_update_exactly_once(
    fake: FakeTelegram, make_adapter: Callable[..., TelegramAdapter]
) -> None:
    """Across stop/start, with pushes while down and one racing the stop, none is lost or doubled."""
    inbox = _Inbox()
    first = make_adapter()
    await first.start(inbox)
    for i in range(3):
        await fake.push_text(42, 9, f"m{i}")
    await inbox.wait_count(3)
    await fake.push_text(42, 9, "m3")  # races the stop: delivered by one adapter or the other
    await first.stop()
    for i in range(4, 7):
        await fake.push_text(42, 9, f"m{i}")
    second = make_adapter()
    await second.start(inbox)
    await inbox.wait_count(7)
    await second.stop()
    assert inbox.texts == [f"m{i}" for i in range(7)]
    assert fake.pending_update_ids == []


async def test_bad_token_gives_clear_error_and_cleans_up(
    fake: FakeTelegram,
    make_adapter: Callable[..., TelegramAdapter],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A rejected token raises PlatformError naming the config key; the token appears nowhere."""
    caplog.set_level(logging.DEBUG)
    secret = "999999:WRONG-secret-token"
    adapter = make_adapter(token=secret)
    with pytest.raises(PlatformError) as caught:
        await adapter.start(_Inbox())
    assert str(caught.value).endswith(TOKEN_REJECTED)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert fake.rejected_tokens == 1
    assert not adapter.application.running
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith("aiohttp")]
    assert ours and not any(secret in line for line in ours)  # aiohttp logs are the fake's


async def test_failed_start_midway_cleans_up(
    fake: FakeTelegram, make_adapter: Callable[..., TelegramAdapter]
) -> None:
    """If deleteWebhook fails after getMe, start raises and nothing is left running."""
    fake.fail_next("deleteWebhook", status=500, description="Internal Server Error")
    adapter = make_adapter()
    with pytest.raises(PlatformError):
        await adapter.start(_Inbox())
    app = adapter.application
    assert not app.running and app.updater is not None and not app.updater.running
    assert fake.calls == ["getMe", "setMyCommands", "deleteWebhook"]


async def test_slow_chat_does_not_delay_other_chat(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox]
) -> None:
    """While chat A's delivery is stuck, chat B's message is delivered (concurrent updates)."""
    _, inbox = running
    gate = inbox.held["1"] = asyncio.Event()
    await fake.push_text(1, 9, "A slow")
    await fake.push_text(2, 9, "B quick")
    got = await inbox.wait_count(1)
    assert [m.text for m in got] == ["B quick"]
    gate.set()
    await inbox.wait_count(2)
    assert inbox.texts == ["B quick", "A slow"]


async def test_one_chat_keeps_arrival_order_when_delivery_is_slow(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox]
) -> None:
    """Later updates of a chat wait for its stuck first delivery; other chats do not."""
    _, inbox = running
    gate = inbox.held["a0"] = asyncio.Event()
    for i in range(5):
        await fake.push_text(1, 9, f"a{i}")
    await fake.push_text(2, 9, "b")
    await fake.wait_for(lambda: not fake.pending_update_ids, WAIT_S)  # all fetched by PTB
    await inbox.wait_until(lambda: "b" in inbox.texts)
    assert inbox.texts == ["b"]
    gate.set()
    await inbox.wait_count(6)
    assert inbox.texts == ["b", "a0", "a1", "a2", "a3", "a4"]


async def test_stop_is_fast_with_long_poll_in_flight(
    fake: FakeTelegram, make_adapter: Callable[..., TelegramAdapter]
) -> None:
    """stop() returns promptly although a 10 s long poll is parked, and confirms offsets."""
    adapter, inbox = make_adapter(poll_timeout_s=10.0), _Inbox()
    await adapter.start(inbox)
    await fake.push_text(42, 9, "hi")
    await inbox.wait_count(1)
    await fake.wait_for(lambda: fake.calls.count("getUpdates") >= 2, WAIT_S)  # parked again
    began = time.perf_counter()
    await adapter.stop()
    assert time.perf_counter() - began < 1.0
    assert fake.pending_update_ids == []
    method, params = fake.requests[-1]
    assert (method, params.get("timeout")) == ("getUpdates", 0)


async def test_httpx_log_lines_do_not_show_token(
    fake: FakeTelegram, running: tuple[TelegramAdapter, _Inbox], caplog: pytest.LogCaptureFixture
) -> None:
    """httpx's request log lines carry '<token>' instead of the bot token."""
    caplog.set_level(logging.INFO, logger="httpx")
    adapter, _ = running
    await fake.push_text(42, 9, "hi")
    await adapter.send(ChatRef(platform="telegram", chat_id="42"), "yo")
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert any("sendMessage" in line and "<token>" in line for line in lines)
    assert not any(fake.token in line for line in lines)
