"""PlatformReplySink against the real python-telegram-bot and the fake Bot API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.platforms.base import ChatRef
from gateway.platforms.telegram import TelegramAdapter
from gateway.reply import PlatformReplySink
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
