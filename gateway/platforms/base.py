"""What every platform adapter hands the runner, and what the runner asks of an adapter."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.media.outbox import OutboundFile

__all__ = [
    "ApprovalChannel",
    "ButtonChannel",
    "ChatRef",
    "Deliver",
    "GroupMode",
    "FileSender",
    "InboundFile",
    "InboundMessage",
    "PlatformAdapter",
    "PlatformName",
]

PlatformName: TypeAlias = Literal["telegram", "discord", "http", "terminal"]
GroupMode: TypeAlias = Literal["mention", "all"]
"""When the bot answers in a group chat: only when addressed (mentioned, replied to, or sent a
command: the default), or every message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRef:
    """Where a reply goes: a chat, and a thread inside it where the platform has threads."""

    platform: PlatformName
    chat_id: str
    thread_id: str | None = None
    reply_to_message_id: str | None = None
    """The inbound message a reply should reference, where the platform shows that."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundFile:
    """A photo, voice note, audio file or document that came with a message, as downloaded by
    the adapter (its type is read from the bytes later, never from `name` or `mime`)."""

    origin: Literal["photo", "voice", "audio", "document", "file"]
    data: bytes | None
    """None when the adapter did not download it (`refusal` says why)."""
    name: str | None = None
    declared_size: int | None = None
    """The size the platform announced before the download."""
    refusal: str | None = None
    """One sentence for the sender when the platform side already refused it (over the Bot
    API's 20 MB download limit, a failed download)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundMessage:
    """One message from a person, already stripped of platform specifics."""

    chat: ChatRef
    user_id: str
    text: str
    is_direct: bool
    """A one-to-one chat with the bot (Telegram private chat, Discord DM, terminal, HTTP)."""
    user_name: str | None = None
    message_id: str | None = None
    received_at: float = field(default_factory=time.time)
    credential: str | None = None
    """The name of the HTTP API key that authenticated the request (HTTP only)."""
    edited: bool = False
    """A new version of the message `message_id` (a Telegram edit), not a new message."""
    files: tuple[InboundFile, ...] = ()
    """Photos, voice notes and files sent with it (`text` is then their caption, maybe empty)."""


Deliver: TypeAlias = Callable[[InboundMessage], Awaitable[None]]
"""The runner's intake. It only enqueues, so an adapter never waits for a turn to finish."""


@runtime_checkable
class PlatformAdapter(Protocol):
    """One chat service. Every SDK error is translated to `agent.errors.PlatformError` kinds."""

    name: PlatformName
    max_message_chars: int
    """The longest text one message may carry (Telegram 4096, Discord 2000)."""
    min_edit_interval_s: float
    """How often a message may be edited while a reply streams in."""

    async def start(self, deliver: Deliver) -> None:
        """Connect and begin handing inbound messages to `deliver`."""
        ...

    async def stop(self) -> None:
        """Stop receiving, finish what is in flight, disconnect."""
        ...

    def render(self, text: str) -> list[str]:
        """A reply (the model's markdown) as this platform's messages, in the markup `send` and
        `edit` take (Telegram HTML, Discord markdown), each within `max_message_chars`; pure."""
        ...

    async def send(self, chat: ChatRef, text: str) -> str:
        """Send one message of `render`'s markup, at most `max_message_chars`; return its id."""
        ...

    async def edit(self, chat: ChatRef, message_id: str, text: str) -> None:
        """Replace the text of a message this adapter sent (in `render`'s markup)."""
        ...

    async def typing(self, chat: ChatRef) -> None:
        """Show that the bot is working (a few seconds on most platforms)."""
        ...


@runtime_checkable
class ApprovalChannel(Protocol):
    """A platform that can ask a person in the chat (Telegram inline keyboard, Discord buttons)."""

    async def ask_approval(
        self,
        chat: ChatRef,
        request: ApprovalRequest,
        *,
        may_answer: Callable[[str], bool],
        timeout_s: float,
    ) -> ApprovalAnswer:
        """Show "Allow once / Always for this session / Deny" with the exact command; only
        users for whom `may_answer(user_id)` holds count; no answer in `timeout_s` is "deny"."""
        ...


@runtime_checkable
class ButtonChannel(Protocol):
    """A platform that can put command buttons under a message (Telegram inline keyboard,
    Discord buttons); a press reaches the runner as that command, sent by the presser."""

    async def send_buttons(
        self, chat: ChatRef, text: str, buttons: Sequence[tuple[str, str]]
    ) -> str:
        """Send `text` (in `render`'s markup, one message) with (label, command) buttons."""
        ...


@runtime_checkable
class FileSender(Protocol):
    """A platform that can send files (Telegram photos and documents, Discord attachments)."""

    async def send_file(self, chat: ChatRef, file: OutboundFile) -> str:
        """Send `file` to `chat` (a photo or a document, with its caption); return its id."""
        ...
