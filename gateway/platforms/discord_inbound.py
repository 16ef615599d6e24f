"""Which Discord messages are for the bot, and as what: pure rules over discord.py messages.

A direct message is always for the bot; in a server, a message that mentions it, replies to
it, or sits in a configured channel (or a thread of one), unless the chat's group mode is
"all". A message with files and no words is still a message (its files are fetched by the
adapter, `discord_media`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import discord

from gateway.platforms.base import ChatRef, GroupMode, InboundMessage, PlatformName

__all__ = [
    "PLATFORM",
    "DiscordMessageFacts",
    "facts_from_message",
    "inbound_from_message",
    "strip_bot_mention",
]

PLATFORM: PlatformName = "discord"
_THREAD_TYPES = frozenset(
    {
        discord.ChannelType.public_thread,
        discord.ChannelType.private_thread,
        discord.ChannelType.news_thread,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscordMessageFacts:
    """What the inbound decision needs from a discord.py message, as plain values."""

    message_id: str
    channel_id: str
    guild_id: str | None
    """None for a direct message."""
    parent_channel_id: str | None
    """The channel a thread belongs to; None when the message is not in a thread."""
    author_id: str
    author_name: str | None
    author_is_bot: bool
    content: str
    mentioned_user_ids: frozenset[str]
    replied_to_user_id: str | None = None
    """The author of the message this one replies to, when Discord resolved it."""
    attachments: int = 0
    """How many files came with it (a photo with no words is still for the bot)."""


def facts_from_message(message: discord.Message) -> DiscordMessageFacts:
    """Read the facts out of a discord.py message (no I/O)."""
    channel = message.channel
    is_thread = getattr(channel, "type", None) in _THREAD_TYPES
    parent_id = getattr(channel, "parent_id", None) if is_thread else None
    return DiscordMessageFacts(
        message_id=str(message.id),
        channel_id=str(channel.id),
        guild_id=str(message.guild.id) if message.guild is not None else None,
        parent_channel_id=str(parent_id) if parent_id is not None else None,
        author_id=str(message.author.id),
        author_name=message.author.name,
        author_is_bot=message.author.bot,
        content=message.content,
        mentioned_user_ids=frozenset(str(user.id) for user in message.mentions),
        replied_to_user_id=_replied_to_author(message),
        attachments=len(message.attachments),
    )


def _replied_to_author(message: discord.Message) -> str | None:
    resolved = message.reference.resolved if message.reference is not None else None
    return str(resolved.author.id) if isinstance(resolved, discord.Message) else None


def strip_bot_mention(content: str, bot_user_id: str) -> str:
    """Remove the bot's mentions (`<@id>` and `<@!id>`) and a leading comma or colon after them."""
    mention = rf"<@!?{re.escape(bot_user_id)}>"
    text = re.sub(rf"^\s*{mention}[\s,:]*", "", content)
    text = re.sub(rf"[ \t]*{mention}", "", text)
    return text.strip()


def inbound_from_message(
    facts: DiscordMessageFacts,
    *,
    bot_user_id: str,
    channels: frozenset[str],
    group_mode: GroupMode = "mention",
) -> InboundMessage | None:
    """Decide whether a message is for the bot and turn it into an `InboundMessage`.

    Ignored: the bot's own and other bots' messages; guild messages that neither mention the bot,
    reply to it, nor sit in a configured channel (or a thread of one), unless `group_mode` is
    "all"; messages with no text left and no files. (Slash commands arrive as interactions,
    not here.)
    """
    if facts.author_is_bot or facts.author_id == bot_user_id:
        return None
    is_direct = facts.guild_id is None
    is_addressed = bot_user_id in (*facts.mentioned_user_ids, facts.replied_to_user_id)
    is_configured = facts.channel_id in channels or facts.parent_channel_id in channels
    if not (is_direct or is_addressed or is_configured or group_mode == "all"):
        return None
    text = strip_bot_mention(facts.content, bot_user_id)
    if not text and not facts.attachments:
        return None
    if facts.parent_channel_id is not None:
        chat = ChatRef(
            platform=PLATFORM, chat_id=facts.parent_channel_id, thread_id=facts.channel_id
        )
    else:
        chat = ChatRef(platform=PLATFORM, chat_id=facts.channel_id)
    if not is_direct:
        chat = ChatRef(
            platform=PLATFORM,
            chat_id=chat.chat_id,
            thread_id=chat.thread_id,
            reply_to_message_id=facts.message_id,
        )
    return InboundMessage(
        chat=chat,
        user_id=facts.author_id,
        user_name=facts.author_name,
        text=text,
        is_direct=is_direct,
        message_id=facts.message_id,
    )
