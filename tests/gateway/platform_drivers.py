"""Drive the real Telegram and Discord adapters through their fakes with one small interface.

A driver knows three people: `alice` and `bob` (both allowlisted, each in a chat of their own)
and `stranger` (not allowlisted). End-to-end tests say things as them and read what the bot's
messages finally say in their chat, edits included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal, Protocol

from gateway.platforms.discord import DiscordAdapter
from gateway.platforms.telegram import TelegramAdapter
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.waits import WAIT_S

__all__ = ["DiscordDriver", "PlatformDriver", "Person", "TelegramDriver", "wait_until"]

Person = Literal["alice", "bob", "stranger"]


async def wait_until(
    predicate: Callable[[], bool], *, what: str, timeout_s: float = WAIT_S
) -> None:
    """Wait for `predicate()` to hold, checking every 10 ms; fail naming `what` after the timeout.

    Polling, because FakeDiscord notifies waiters before it stores a posted message.
    """
    try:
        async with asyncio.timeout(timeout_s):
            while not predicate():  # noqa: ASYNC110 - see the docstring
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


class PlatformDriver(Protocol):
    platform: Literal["telegram", "discord"]
    max_chars: int

    def gateway_config(self) -> dict[str, Any]: ...
    def adapter(self) -> Any: ...
    async def say(self, person: Person, text: str) -> None: ...
    def replies(self, person: Person) -> list[str]: ...
    async def press(self, person: Person, label: str) -> None: ...


class TelegramDriver:
    """Private chats: each person's chat id is their user id."""

    platform: Literal["telegram"] = "telegram"
    max_chars = 4096
    IDS = {"alice": 1001, "bob": 1002, "stranger": 6666}

    def __init__(self, fake: FakeTelegram) -> None:
        self.fake = fake

    def gateway_config(self) -> dict[str, Any]:
        allowed = [str(self.IDS["alice"]), str(self.IDS["bob"])]
        return {"telegram": {"allowed_users": allowed, "admins": allowed}}

    def adapter(self) -> TelegramAdapter:
        return TelegramAdapter(
            token=self.fake.token,
            base_url=self.fake.base_url,
            poll_timeout_s=1.0,
            request_timeout_s=3.0,
        )

    async def say(self, person: Person, text: str) -> None:
        user = self.IDS[person]
        await self.fake.push_text(user, user, text, username=person)

    async def press(self, person: Person, label: str) -> None:
        """`person` presses the newest button labelled `label` in their chat."""
        chat = self.IDS[person]
        for message in reversed(self.fake.sent):
            markup = (
                self.fake.markup_of(chat, message.message_id) if message.chat_id == chat else None
            )
            for button in [b for row in (markup or {}).get("inline_keyboard", []) for b in row]:
                if button["text"] == label:
                    await self.fake.press_button(
                        chat, message.message_id, self.IDS[person], button["callback_data"]
                    )
                    return
        raise AssertionError(f"no button {label!r} in {person}'s chat")

    def replies(self, person: Person) -> list[str]:
        chat = self.IDS[person]
        final = {m.message_id: m.text for m in self.fake.sent if m.chat_id == chat}
        for chat_id, message_id, text in self.fake.edits:
            if chat_id == chat:
                final[message_id] = text
        return [final[k] for k in sorted(final)]


class DiscordDriver:
    """Alice writes in the bot's DM, Bob in a configured guild channel, the stranger there too."""

    platform: Literal["discord"] = "discord"
    max_chars = 2000

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.stranger_id = 4_242_424_242

    def _channel(self, person: Person) -> int:
        return self.fake.dm_id if person == "alice" else self.fake.random_id

    def gateway_config(self) -> dict[str, Any]:
        human = str(self.fake.human_id)
        return {"discord": {"allowed_users": [human], "admins": [human]}}

    def adapter(self) -> DiscordAdapter:
        return DiscordAdapter(
            token=self.fake.token,
            channels=[str(self.fake.random_id)],
            guild_ready_timeout_s=0.05,
            start_timeout_s=5.0,
            request_timeout_s=5.0,
        )

    async def say(self, person: Person, text: str) -> None:
        author = self.stranger_id if person == "stranger" else None
        await self.fake.user_says(text, channel_id=self._channel(person), author_id=author)

    async def press(self, person: Person, label: str) -> None:
        """`person` presses the newest button labelled `label` in their channel."""
        channel = str(self._channel(person))
        for message in sorted(self.fake.messages.values(), key=lambda m: -int(m["id"])):
            if message["channel_id"] != channel:
                continue
            for row in message.get("components", []):
                for button in row["components"]:
                    if button.get("label") == label:
                        await self.fake.press_button(
                            int(message["id"]), button["custom_id"], user_id=self._author(person)
                        )
                        return
        raise AssertionError(f"no button {label!r} in {person}'s channel")

    def replies(self, person: Person) -> list[str]:
        channel = str(self._channel(person))
        bot = str(self.fake.bot_id)
        mine = [
            m
            for m in self.fake.messages.values()
            if m["channel_id"] == channel and m["author"]["id"] == bot
        ]
        if person != "alice":  # the guild channel is shared: keep replies to this person
            wanted = {
                m["id"]
                for m in self.fake.messages.values()
                if m["channel_id"] == channel and m["author"]["id"] == str(self._author(person))
            }
            mine = [m for m in mine if _replied_to(m) in wanted or _replied_to(m) is None]
        return [m["content"] for m in sorted(mine, key=lambda m: int(m["id"]))]

    def _author(self, person: Person) -> int:
        return self.stranger_id if person == "stranger" else self.fake.human_id


def _replied_to(message: dict[str, Any]) -> str | None:
    reference = message.get("message_reference")
    return reference["message_id"] if reference else None
