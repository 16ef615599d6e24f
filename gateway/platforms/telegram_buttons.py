"""Telegram buttons that stand for a chat command (the compaction receipt's "Bring back" and
"Undo compaction"): an inline keyboard whose `callback_data` is the command, and the press turned
back into an ordinary inbound message from the person who pressed.

Bot API (core.telegram.org/bots/api#inlinekeyboardbutton): `callback_data` is 1-64 bytes; a
press arrives as a `callback_query` carrying the button's data, the presser (`from`) and the
message the keyboard belongs to (`message`, with its chat).
"""

from __future__ import annotations

from collections.abc import Sequence

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ChatType

from gateway.platforms.base import ChatRef, InboundMessage

__all__ = ["COMMAND_DATA_PREFIX", "command_keyboard", "inbound_from_press"]

COMMAND_DATA_PREFIX = "cmd:"
MAX_DATA_BYTES = 64


def command_keyboard(buttons: Sequence[tuple[str, str]]) -> InlineKeyboardMarkup | None:
    """One row of (label, command) buttons; a command too long for `callback_data` is left
    out (it can still be typed). None when no button fits."""
    row = [
        InlineKeyboardButton(label, callback_data=COMMAND_DATA_PREFIX + command)
        for label, command in buttons
        if len((COMMAND_DATA_PREFIX + command).encode()) <= MAX_DATA_BYTES
    ]
    return InlineKeyboardMarkup([row]) if row else None


def inbound_from_press(update: Update) -> InboundMessage | None:
    """A press of a command button, as the command typed by the presser in that chat; None
    for any other button (approvals) or a press without its message."""
    query = update.callback_query
    data = query.data if query is not None else None
    if query is None or not data or not data.startswith(COMMAND_DATA_PREFIX):
        return None
    message = query.message
    if message is None or query.from_user.is_bot:
        return None
    chat = message.chat
    is_direct = chat.type == ChatType.PRIVATE
    thread = getattr(message, "message_thread_id", None)
    is_topic = not is_direct and bool(getattr(message, "is_topic_message", False))
    ref = ChatRef(
        platform="telegram",
        chat_id=str(chat.id),
        thread_id=str(thread) if is_topic and thread is not None else None,
    )
    user = query.from_user
    return InboundMessage(
        chat=ref,
        user_id=str(user.id),
        text=data[len(COMMAND_DATA_PREFIX) :],
        is_direct=is_direct,
        user_name=user.username or user.full_name,
    )
