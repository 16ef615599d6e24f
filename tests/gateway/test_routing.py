"""Chat → session keys."""

from __future__ import annotations

import pytest

from gateway.platforms.base import ChatRef, InboundMessage
from gateway.routing import chat_key


def _msg(
    platform: str = "telegram",
    *,
    chat: str = "100",
    user: str = "7",
    direct: bool = False,
    thread: str | None = None,
) -> InboundMessage:
    return InboundMessage(
        chat=ChatRef(platform=platform, chat_id=chat, thread_id=thread),  # type: ignore[arg-type]
        user_id=user,
        text="hi",
        is_direct=direct,
    )


@pytest.mark.parametrize(
    ("msg", "mode", "key"),
    [
        (_msg(direct=True, user="7"), "per_user", "dm:7"),
        (_msg(direct=True, user="7", chat="other"), "per_chat", "dm:7"),
        (_msg(chat="100", user="7"), "per_user", "chat:100:user:7"),
        (_msg(chat="100", user="8"), "per_user", "chat:100:user:8"),
        (_msg(chat="100", user="7"), "per_chat", "chat:100"),
        (_msg(chat="100", user="7", thread="5"), "per_user", "chat:100:thread:5"),
        (_msg(chat="100", user="8", thread="5"), "per_chat", "chat:100:thread:5"),
    ],
)
def test_chat_key(msg: InboundMessage, mode: str, key: str) -> None:
    """DMs: one per user; groups: per user per chat (or per chat); threads: one per thread."""
    assert chat_key(msg, group_sessions=mode) == key  # type: ignore[arg-type]
