"""Telegram replies that look native: HTML entities, well-formed splits, the plain-text fallback,
the command menu, and stream edits that respect flood control — real PTB against FakeTelegram.

Contracts: HTML style and its 400 "can't parse entities" (https://core.telegram.org/bots/api#html-style),
sendMessage's 1-4096 characters after entity parsing (https://core.telegram.org/bots/api#sendmessage),
setMyCommands / BotCommand (https://core.telegram.org/bots/api#setmycommands), and 429 with
`parameters.retry_after` (https://core.telegram.org/bots/api#responseparameters).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.commands import COMMANDS
from gateway.platforms.base import ChatRef
from gateway.platforms.telegram import TelegramAdapter
from gateway.reply import PlatformReplySink
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_rules import command_problem

CHAT = ChatRef(platform="telegram", chat_id="42")


@pytest.fixture
async def telegram() -> AsyncIterator[tuple[FakeTelegram, TelegramAdapter]]:
    """A started adapter on a fake with one private chat (42)."""
    async with FakeTelegram() as fake:
        adapter = TelegramAdapter(
            token=fake.token, base_url=fake.base_url, poll_timeout_s=1.0, request_timeout_s=3.0
        )
        await adapter.start(_ignore)
        await fake.push_text(42, 42, "hello")  # the chat exists once someone wrote in it
        await fake.wait_for(lambda: not fake.pending_update_ids)  # fetched and confirmed
        try:
            yield fake, adapter
        finally:
            await adapter.stop()


async def _ignore(_: object) -> None:
    return None


async def _reply(adapter: TelegramAdapter, text: str) -> None:
    sink = PlatformReplySink(adapter, CHAT)
    await sink.start("s1")
    await sink.finish(text)


async def test_markdown_arrives_as_html_entities(
    telegram: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """The user reads no asterisks or fences: bold, code and a Python block are entities."""
    fake, adapter = telegram
    await _reply(adapter, "**Done.** Run `make test`:\n\n```python\nprint('ok')\n```")
    sent = fake.sent[-1]
    assert sent.parse_mode == "HTML"
    assert sent.text == "Done. Run make test:\n\nprint('ok')"
    kinds = [(e["type"], e.get("language")) for e in sent.entities]
    assert kinds == [("bold", None), ("code", None), ("pre", "python")]


async def test_a_6000_character_code_block_splits_into_well_formed_messages(
    telegram: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """Every piece is accepted by the Bot API, is a Python code block of its own, and the code
    reads back line for line."""
    fake, adapter = telegram
    lines = [f"result_{i:04d} = transform(batch[{i}]) & mask  # <row>" for i in range(125)]
    code = "\n".join(lines)
    assert len(code) > 6000
    await _reply(adapter, f"Here it is:\n\n```python\n{code}\n```")
    pieces = [m for m in fake.sent if m.chat_id == 42]
    assert len(pieces) >= 2
    assert all(m.parse_mode == "HTML" for m in pieces)
    assert all(any(e.get("language") == "python" for e in m.entities) for m in pieces)
    shown = "\n".join(m.text for m in pieces)
    assert shown.splitlines() == ["Here it is:", "", *lines]
    failed = [p for m, p in fake.requests if m == "sendMessage" and p.get("parse_mode") is None]
    assert failed == []  # nothing needed the plain fallback


async def test_a_rejected_entity_falls_back_to_plain_text(
    telegram: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """Markup the Bot API refuses (here a tag it does not support) is sent again without a parse
    mode, as the text the user would have read; nothing is lost."""
    fake, adapter = telegram
    message_id = await adapter.send(CHAT, "<b>bold</b> and <p>para</p> &amp; more")
    tries = [p for m, p in fake.requests if m == "sendMessage"]
    assert [t.get("parse_mode") for t in tries] == ["HTML", None]
    assert fake.sent[-1].text == "bold and para & more"
    assert str(fake.sent[-1].message_id) == message_id


async def test_a_parse_error_on_an_edit_falls_back_too(
    telegram: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """An edit whose markup Telegram cannot parse still lands, as plain text."""
    fake, adapter = telegram
    message_id = await adapter.send(CHAT, "first")
    fake.fail_next(
        "editMessageText",
        status=400,
        description='Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0',
    )
    await adapter.edit(CHAT, message_id, "<b>second</b>")
    assert fake.text_of(42, int(message_id)) == "second"


async def test_the_command_menu_is_set_from_the_command_table(
    telegram: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """At start the bot's menu lists every chat command with its summary, in table order."""
    fake, _ = telegram
    assert fake.commands() == [{"command": s.name, "description": s.summary} for s in COMMANDS]


@pytest.mark.parametrize(
    ("commands", "problem"),
    [
        ([{"command": "Status", "description": "x"}], "Bad Request: BOT_COMMAND_INVALID"),
        ([{"command": "/new", "description": "x"}], "Bad Request: BOT_COMMAND_INVALID"),
        ([{"command": "a" * 33, "description": "x"}], "Bad Request: BOT_COMMAND_INVALID"),
        ([{"command": "ok", "description": " "}], "Bad Request: command description must be non-empty"),
        ([{"command": "ok", "description": "d" * 257}], "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID"),
        ([{"command": "ok", "description": "fine"}], None),
    ],
)  # fmt: skip
def test_the_fake_refuses_commands_the_bot_api_refuses(
    commands: list[dict[str, str]], problem: str | None
) -> None:
    """BotCommand: 1-32 lowercase letters, digits or underscores; a description of 1-256."""
    assert command_problem(commands) == problem


def test_every_table_command_is_a_valid_telegram_command() -> None:
    """The table itself passes the Bot API's rules, so the menu can always be set."""
    menu = [{"command": s.name, "description": s.summary} for s in COMMANDS]
    assert command_problem(menu) is None


async def test_stream_edits_pause_for_flood_control_and_the_final_text_still_lands(
    telegram: tuple[FakeTelegram, TelegramAdapter],
) -> None:
    """A 429 on a stream edit holds further edits for `retry_after`; the finished reply waits
    the limit out and replaces the preview."""
    fake, adapter = telegram
    now = [10.0]
    sink = PlatformReplySink(adapter, CHAT, clock=lambda: now[0])
    await sink.start("s1")
    await sink.on_text("First words.")  # the preview message (a sentence: shown at once)
    now[0] = 12.0
    fake.inject_retry_after(1, method="editMessageText")
    await sink.on_text(" and more")  # 429: edits pause until t=13
    now[0] = 12.5
    await sink.on_text(" still more")  # within the pause: no request at all
    assert [m for m in fake.calls if m == "editMessageText"] == ["editMessageText"]
    fake.inject_retry_after(1, method="editMessageText")  # the final edit is limited too
    await sink.finish("First words. and more still more, **done**")
    assert [m for m in fake.calls if m == "editMessageText"] == ["editMessageText"] * 3
    final = fake.text_of(42, fake.sent[-1].message_id)
    assert final == "First words. and more still more, done"
    assert len([m for m in fake.sent if m.chat_id == 42]) == 1  # edited in place, not resent
