"""Discord approvals: buttons in the channel, a press from an admin, or the deadline.

Contract (https://discord.com/developers/docs/interactions/receiving-and-responding and
https://discord.com/developers/docs/components/reference): the question is a message with an
action row of three buttons (type 2, custom_id ≤ 100 characters); a press is an
INTERACTION_CREATE of type 3; the app answers it once via POST /interactions/{id}/{token}/callback
(type 7 UPDATE_MESSAGE to replace the buttons with the outcome, type 4 with flag 64 for an
ephemeral notice); at the deadline the bot edits the message itself (PATCH, no components).
The real discord.py drives the strict FakeDiscord.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest

from agent.access import ApprovalAnswer, ApprovalRequest
from gateway.approvals import parse_button_data
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.platforms.discord import DiscordAdapter
from tests.fakes.discord import FakeDiscord, patch_discord
from tests.waits import WAIT_S

__all__ = ["patch_discord"]  # the fixture: exported so the import counts as used (ruff F401/F811)

COMMAND = "rm -rf build/* && git push --force"
REQUEST = ApprovalRequest(kind="command", subject=COMMAND, reason="recursive delete of build/*")


@pytest.fixture
async def bot(
    patch_discord: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[tuple[FakeDiscord, DiscordAdapter]]:
    """A started adapter; discord.py must log no errors (a payload it could not parse)."""
    caplog.set_level(logging.INFO, logger="discord")
    inbox: asyncio.Queue[InboundMessage] = asyncio.Queue()
    adapter = DiscordAdapter(
        token=patch_discord.token, guild_ready_timeout_s=0.05, start_timeout_s=5.0
    )
    await adapter.start(inbox.put)
    try:
        yield patch_discord, adapter
    finally:
        await adapter.stop()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [] and inbox.empty()


def _ask(
    fake: FakeDiscord, adapter: DiscordAdapter, *, timeout_s: float = WAIT_S
) -> asyncio.Task[ApprovalAnswer]:
    return asyncio.create_task(
        adapter.ask_approval(
            ChatRef(platform="discord", chat_id=str(fake.general_id)),
            REQUEST,
            may_answer=lambda user_id: user_id == str(fake.owner_id),
            timeout_s=timeout_s,
        )
    )


async def _question(fake: FakeDiscord) -> tuple[int, dict[str, str]]:
    """Wait for the question; return its message id and {label: custom_id}."""
    call = await fake.wait_rest_call("POST", f"/channels/{fake.general_id}/messages")
    message = next(m for m in fake.messages.values() if m["content"] == call.body["content"])
    buttons = {
        c["label"]: c["custom_id"] for row in message["components"] for c in row["components"]
    }
    return int(message["id"]), buttons


async def test_the_question_shows_the_exact_command_and_three_buttons(
    bot: tuple[FakeDiscord, DiscordAdapter],
) -> None:
    """The content renders as the exact command (markdown escaped) with the three answers."""
    fake, adapter = bot
    task = _ask(fake, adapter)
    message_id, buttons = await _question(fake)
    content = fake.messages[message_id]["content"]
    assert COMMAND.replace("*", "\\*") in content  # `*` would otherwise render as italics
    assert list(buttons) == ["Allow once", "Always for this session", "Deny"]
    assert all(parse_button_data(custom_id) for custom_id in buttons.values())
    await fake.press_button(message_id, buttons["Deny"], user_id=fake.owner_id)
    assert await asyncio.wait_for(task, WAIT_S) == "deny"


@pytest.mark.parametrize(
    ("label", "answer"),
    [("Allow once", "once"), ("Always for this session", "session"), ("Deny", "deny")],
)
async def test_an_admin_press_answers_with_an_update_message(
    bot: tuple[FakeDiscord, DiscordAdapter], label: str, answer: ApprovalAnswer
) -> None:
    """The admin's press is the answer; the interaction is answered with type 7, buttons gone."""
    fake, adapter = bot
    task = _ask(fake, adapter)
    message_id, buttons = await _question(fake)
    interaction_id = await fake.press_button(message_id, buttons[label], user_id=fake.owner_id)
    assert await asyncio.wait_for(task, WAIT_S) == answer
    await fake.wait_for(
        lambda: fake.interactions[interaction_id]["type"] == 7, what="UPDATE_MESSAGE"
    )
    message = fake.messages[message_id]
    assert message["components"] == [] and label in message["content"].splitlines()[-1]


async def test_a_stranger_gets_an_ephemeral_notice(bot: tuple[FakeDiscord, DiscordAdapter]) -> None:
    """A non-admin press is told so privately; the question stays open for an admin."""
    fake, adapter = bot
    task = _ask(fake, adapter)
    message_id, buttons = await _question(fake)
    await fake.press_button(message_id, buttons["Allow once"], user_id=fake.human_id)
    await fake.wait_for(lambda: bool(fake.ephemeral_replies), what="an ephemeral reply")
    assert fake.ephemeral_replies[0][1] == "Only an admin can answer this."
    assert not task.done() and fake.messages[message_id]["components"]
    await fake.press_button(message_id, buttons["Allow once"], user_id=fake.owner_id)
    assert await asyncio.wait_for(task, WAIT_S) == "once"


async def test_silence_is_a_denial(bot: tuple[FakeDiscord, DiscordAdapter]) -> None:
    """Nobody answers before the deadline: deny, and the bot removes the buttons itself."""
    fake, adapter = bot
    task = _ask(fake, adapter, timeout_s=0.3)
    message_id, _ = await _question(fake)
    assert await asyncio.wait_for(task, WAIT_S) == "deny"
    await fake.wait_rest_call("PATCH", f"/channels/{fake.general_id}/messages/{message_id}")
    message = fake.messages[message_id]
    assert message["components"] == [] and "No answer within" in message["content"]


def test_markdown_in_the_command_is_escaped() -> None:
    """`_`, `*` and backticks in a command show as typed, not as formatting."""
    from gateway.platforms.discord_approval import approval_text

    request = ApprovalRequest(kind="command", subject="echo `x` *y* _z_", reason="r")
    text: Any = approval_text(request)
    assert discord.utils.remove_markdown(text) != text and "\\*y\\*" in text
