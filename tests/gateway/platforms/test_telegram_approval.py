"""Telegram approvals: an inline keyboard in the chat, a press from an admin, or the deadline.

Contract (Bot API, https://core.telegram.org/bots/api): the question is a `sendMessage` with an
`InlineKeyboardMarkup` whose buttons carry `callback_data` (1-64 bytes); a press arrives as a
`callback_query` update, which the bot must answer with `answerCallbackQuery`; the keyboard is
removed with `editMessageReplyMarkup` (no `reply_markup`) and the outcome is written under the
question with `editMessageText`. The real python-telegram-bot drives the strict FakeTelegram.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.tools.approval import render_request
from gateway.approvals import button_data, parse_button_data
from gateway.platforms.base import ChatRef
from gateway.platforms.telegram import TelegramAdapter
from tests.fakes.telegram import FakeTelegram
from tests.waits import WAIT_S

CHAT = 42
ADMIN, STRANGER = 1001, 2002
COMMAND = "git push --force origin main && rm -rf build/*"
REQUEST = ApprovalRequest(kind="command", subject=COMMAND, reason="git push --force")


@pytest.fixture
async def bot() -> AsyncIterator[tuple[FakeTelegram, TelegramAdapter]]:
    """A started adapter; the chat exists because the admin wrote in it first."""
    inbound: list[str] = []
    arrived = asyncio.Event()

    async def deliver(message: Any) -> None:
        inbound.append(message.text)
        arrived.set()

    async with FakeTelegram() as fake:
        await fake.push_text(CHAT, ADMIN, "hello")
        adapter = TelegramAdapter(
            token=fake.token, base_url=fake.base_url, poll_timeout_s=1.0, request_timeout_s=2.0
        )
        await adapter.start(deliver)
        async with asyncio.timeout(WAIT_S):
            await arrived.wait()
        try:
            yield fake, adapter
        finally:
            await adapter.stop()
    assert inbound == ["hello"], "a button press must never become a chat message"


def _ask(adapter: TelegramAdapter, *, timeout_s: float = WAIT_S) -> asyncio.Task[ApprovalAnswer]:
    return asyncio.create_task(
        adapter.ask_approval(
            ChatRef(platform="telegram", chat_id=str(CHAT)),
            REQUEST,
            may_answer=lambda user_id: user_id == str(ADMIN),
            timeout_s=timeout_s,
        )
    )


async def _question(fake: FakeTelegram) -> tuple[int, dict[str, str]]:
    """Wait for the question; return its message id and {label: callback_data}."""
    await fake.wait_for(lambda: any(m.text.startswith("⚠️") for m in fake.sent), WAIT_S)
    sent = next(m for m in fake.sent if m.text.startswith("⚠️"))
    markup = fake.markup_of(CHAT, sent.message_id)
    assert markup is not None
    buttons = {b["text"]: b["callback_data"] for row in markup["inline_keyboard"] for b in row}
    return sent.message_id, buttons


async def test_the_question_shows_the_exact_command_and_three_buttons(
    bot: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """The message is the rendered request, plain text, with the three answers as buttons."""
    fake, adapter = bot
    task = _ask(adapter)
    message_id, buttons = await _question(fake)
    assert fake.text_of(CHAT, message_id) == render_request(REQUEST)
    assert COMMAND in fake.text_of(CHAT, message_id)
    assert list(buttons) == ["Allow once", "Always for this session", "Deny"]
    assert all(len(data.encode()) <= 64 and parse_button_data(data) for data in buttons.values())
    question = next(p for m, p in fake.requests if m == "sendMessage" and "reply_markup" in p)
    assert "parse_mode" not in question
    await fake.press_button(CHAT, message_id, ADMIN, buttons["Deny"])
    assert await asyncio.wait_for(task, WAIT_S) == "deny"


@pytest.mark.parametrize(
    ("label", "answer"),
    [("Allow once", "once"), ("Always for this session", "session"), ("Deny", "deny")],
)
async def test_an_admin_press_answers_and_the_keyboard_goes_away(
    bot: tuple[FakeTelegram, TelegramAdapter], label: str, answer: ApprovalAnswer
) -> None:
    """The admin's press is the answer; the query is answered, buttons removed, outcome noted."""
    fake, adapter = bot
    task = _ask(adapter)
    message_id, buttons = await _question(fake)
    query_id = await fake.press_button(CHAT, message_id, ADMIN, buttons[label])
    assert await asyncio.wait_for(task, WAIT_S) == answer
    await fake.wait_for(lambda: fake.markup_of(CHAT, message_id) is None, WAIT_S)
    assert [q for q, _ in fake.callback_answers] == [query_id]
    assert label in fake.text_of(CHAT, message_id).splitlines()[-1]


async def test_a_stranger_cannot_answer(bot: tuple[FakeTelegram, TelegramAdapter]) -> None:
    """A non-admin press is answered with a notice and the question stays open for an admin."""
    fake, adapter = bot
    task = _ask(adapter)
    message_id, buttons = await _question(fake)
    await fake.press_button(CHAT, message_id, STRANGER, buttons["Allow once"], username="eve")
    await fake.wait_for(lambda: len(fake.callback_answers) == 1, WAIT_S)
    assert fake.callback_answers[0][1] == "Only an admin can answer this."
    assert not task.done() and fake.markup_of(CHAT, message_id) is not None
    await fake.press_button(CHAT, message_id, ADMIN, buttons["Deny"])
    assert await asyncio.wait_for(task, WAIT_S) == "deny"


async def test_silence_is_a_denial(bot: tuple[FakeTelegram, TelegramAdapter]) -> None:
    """Nobody answers before the deadline: deny, buttons removed, the timeout written down."""
    fake, adapter = bot
    task = _ask(adapter, timeout_s=0.3)
    message_id, buttons = await _question(fake)
    assert await asyncio.wait_for(task, WAIT_S) == "deny"
    await fake.wait_for(lambda: "No answer within" in fake.text_of(CHAT, message_id), WAIT_S)
    assert fake.markup_of(CHAT, message_id) is None
    await fake.press_button(CHAT, message_id, ADMIN, buttons["Allow once"], stale=True)
    await fake.wait_for(lambda: len(fake.callback_answers) == 1, WAIT_S)
    assert fake.callback_answers[0][1] == "This question is no longer open."


async def test_presses_of_other_buttons_are_not_ours(
    bot: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """Callback data that is not one of our approval buttons never settles anything."""
    assert parse_button_data("hx:abc:o") == ("abc", "once")
    for data in ("", "hx:abc", "hx:abc:x", "other:abc:o", button_data("a", "deny") + ":extra"):
        assert parse_button_data(data) is None, data
