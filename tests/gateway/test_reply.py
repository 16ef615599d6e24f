"""PlatformReplySink against the real python-telegram-bot and the fake Bot API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.platforms.base import ChatRef
from gateway.platforms.telegram import TelegramAdapter
from gateway.reply import PlatformReplySink, first_preview_ready
from tests.fakes.telegram import FakeTelegram


@pytest.fixture
async def adapter() -> AsyncIterator[tuple[FakeTelegram, TelegramAdapter]]:
    async with FakeTelegram() as fake:
        built = TelegramAdapter(
            token=fake.token, base_url=fake.base_url, poll_timeout_s=1.0, request_timeout_s=2.0
        )
        await built.start(_ignore)
        try:
            yield fake, built
        finally:
            await built.stop()


async def _ignore(_: object) -> None:
    return None


async def test_a_blocked_chat_gets_nothing_more_and_its_route_is_dropped(
    adapter: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """After Telegram answers 403 "bot was blocked by the user" (Bot API: sendMessage fails with
    Forbidden), the sink sends no further pieces and tells the runner once to drop the route."""
    fake, telegram = adapter
    fake.block(42)
    gone: list[str] = []
    sink = PlatformReplySink(
        telegram,
        ChatRef(platform="telegram", chat_id="42"),
        on_recipient_gone=lambda: gone.append("42"),
    )
    await sink.start("s1")
    await sink.finish("x" * 9000)  # three messages' worth
    sends = [p for m, p in fake.requests if m == "sendMessage" and p.get("chat_id") == 42]
    assert len(sends) == 1
    assert gone == ["42"]


def _sent(fake: FakeTelegram) -> list[str]:
    return [str(p.get("text")) for m, p in fake.requests if m == "sendMessage"]


async def test_first_streamed_message_waits_for_a_sentence(
    adapter: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """The first message (what a phone's notification shows) is never a lone word: it goes
    out once a sentence has ended; later text streams in by edits."""
    fake, telegram = adapter
    await fake.push_text(42, 42, "hi")  # the fake knows a chat once someone wrote in it
    now = [100.0]
    sink = PlatformReplySink(
        telegram, ChatRef(platform="telegram", chat_id="42"), clock=lambda: now[0]
    )
    for piece in ["Hello", " there", ", my", " friend"]:
        await sink.on_text(piece)
        now[0] += 0.1
    assert _sent(fake) == []
    await sink.on_text(". How")
    assert _sent(fake) == ["Hello there, my friend. How"]
    now[0] += 2.0
    await sink.finish("Hello there, my friend. How are you?")
    assert _sent(fake) == ["Hello there, my friend. How"]  # the rest arrived as an edit
    assert [e[2] for e in fake.edits] == ["Hello there, my friend. How are you?"]


async def test_first_streamed_message_goes_out_after_a_second_without_a_sentence(
    adapter: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """A reply that takes its time to end a sentence shows after about a second of text."""
    fake, telegram = adapter
    await fake.push_text(42, 42, "hi")  # the fake knows a chat once someone wrote in it
    now = [100.0]
    sink = PlatformReplySink(
        telegram, ChatRef(platform="telegram", chat_id="42"), clock=lambda: now[0]
    )
    await sink.on_text("Considering")
    now[0] += 0.5
    await sink.on_text(" the")
    assert _sent(fake) == []
    now[0] += 0.6
    await sink.on_text(" options")
    assert _sent(fake) == ["Considering the options"]


@pytest.mark.parametrize(
    ("text", "waited", "ready"),
    [
        ("Hello", 0.2, False),
        ("Hello", 1.0, True),
        ("Hi.", 0.1, False),  # a sentence, but too short to read as one
        ("Hello there, friend. ", 0.1, True),
        ("A line of text\nmore", 0.1, True),
        ("   ", 5.0, False),
        ("你好，我是你的助手。", 0.1, False),  # ten characters: under the length floor
        ("你好，我是你的助手，很高兴认识你。", 0.1, True),
    ],
)
def test_first_preview_ready(text: str, waited: float, ready: bool) -> None:
    assert first_preview_ready(text, waited) is ready
