"""Which Telegram updates are for the bot, and as what: pure rules over PTB's parsed updates.

A private chat is always for the bot. In a group the bot answers only what is addressed to it
(a command, a mention of it, a reply to one of its messages) unless the chat's group mode is
"all"; a command addressed to another bot (`/new@other_bot`) is never ours.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from telegram import Message, Update
from telegram.constants import ChatType, MessageEntityType

from gateway.platforms.base import ChatRef, GroupMode, InboundMessage, PlatformName
from gateway.platforms.telegram_media import file_targets

__all__ = [
    "PLATFORM",
    "inbound_from_update",
    "is_addressed",
    "normalise_command",
    "strip_bot_mention",
]

PLATFORM: PlatformName = "telegram"
_DIRECT_AND_GROUP = frozenset({ChatType.PRIVATE, ChatType.GROUP, ChatType.SUPERGROUP})
_COMMAND = re.compile(r"^(/[A-Za-z0-9_]+)(?:@([A-Za-z0-9_]+))?(?=\s|$)")


def normalise_command(text: str, bot_username: str) -> str | None:
    """'/New@Bot args' -> '/new args'; None when the command is addressed to another bot."""
    match = _COMMAND.match(text)
    if match is None:
        return text
    command, target = match.group(1), match.group(2)
    if target is not None and target.lower() != bot_username.lower():
        return None
    return command.lower() + text[match.end() :]


def is_addressed(message: Message, bot_username: str, bot_id: int | None) -> bool:
    """Whether a group message is for the bot: a command (other bots' were dropped already),
    a mention of it (`@username`, or a text mention of its user), or a reply to one of its
    messages (Bot API: MessageEntity types `bot_command`, `mention`, `text_mention`)."""
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.is_bot:
        if bot_id is None or reply.from_user.id == bot_id:
            return True
    wanted = "@" + bot_username.lower()
    entities = {**message.parse_entities(), **message.parse_caption_entities()}  # photo captions
    for entity, text in entities.items():
        if entity.type == MessageEntityType.BOT_COMMAND and entity.offset == 0:
            return True
        if entity.type == MessageEntityType.MENTION and text.lower() == wanted:
            return True
        if entity.type == MessageEntityType.TEXT_MENTION and entity.user is not None:
            if bot_id is not None and entity.user.id == bot_id:
                return True
    return False


def strip_bot_mention(text: str, bot_username: str) -> str:
    """`@hermes_bot, what now?` -> `what now?`: the bot's own @username removed."""
    mention = rf"@{re.escape(bot_username)}\b"
    stripped = re.sub(rf"(?i)^\s*{mention}[\s,:]*", "", text)
    return re.sub(rf"(?i)[ \t]*{mention}", "", stripped).strip()


def inbound_from_update(
    update: Update,
    bot_username: str,
    *,
    bot_id: int | None = None,
    group_mode: GroupMode = "mention",
    group_chats: Mapping[str, GroupMode] | None = None,
) -> InboundMessage | None:
    """The gateway's view of a message from a person, new or edited (`edited`): its text, or
    a new message's caption with its files; None for anything else (channel posts live in
    other fields). In a
    group, only what is addressed to the bot (`is_addressed`), unless the chat's mode (from
    `group_chats`, else `group_mode`) is "all"."""
    message = update.message or update.edited_message
    if message is None:
        return None
    # A photo, voice note or file (a new message only): its caption is the text, maybe empty;
    # the adapter fetches the files (`telegram_media`).
    has_files = update.message is not None and bool(file_targets(message))
    if message.text is None and not has_files:
        return None
    user, chat = message.from_user, message.chat
    if user is None or user.is_bot or chat.type not in _DIRECT_AND_GROUP:
        return None
    if message.text is not None:
        text = normalise_command(message.text, bot_username)
    else:
        text = message.caption or ""
    if text is None:
        return None
    is_direct = chat.type == ChatType.PRIVATE
    if not is_direct:
        mode = (group_chats or {}).get(str(chat.id), group_mode)
        if mode == "mention" and not is_addressed(message, bot_username, bot_id):
            return None
        text = strip_bot_mention(text, bot_username)
        if not text and not has_files:
            return None
    is_topic = not is_direct and bool(message.is_topic_message)
    ref = ChatRef(
        platform=PLATFORM,
        chat_id=str(chat.id),
        thread_id=str(message.message_thread_id) if is_topic else None,
        reply_to_message_id=None if is_direct else str(message.message_id),
    )
    return InboundMessage(
        chat=ref,
        user_id=str(user.id),
        text=text,
        is_direct=is_direct,
        user_name=user.username or user.full_name,
        message_id=str(message.message_id),
        received_at=message.date.timestamp(),
        edited=update.message is None,
    )
