"""Chat → session keys and access control."""

from __future__ import annotations

import pytest

from agent.config import DiscordConfig, GatewayConfig, TelegramConfig
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.routing import chat_key, is_admin, is_allowed


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


def test_unknown_users_are_refused_by_default() -> None:
    """With empty allowlists nobody may talk to the Telegram or Discord bot."""
    config = GatewayConfig()
    assert not is_allowed(_msg("telegram"), config)
    assert not is_allowed(_msg("discord"), config)


def test_allowlist_admits_named_users_only() -> None:
    """Only the ids on a platform's allowlist pass, and only on that platform."""
    config = GatewayConfig(telegram=TelegramConfig(allowed_users=["7"]))
    assert is_allowed(_msg("telegram", user="7"), config)
    assert not is_allowed(_msg("telegram", user="8"), config)
    assert not is_allowed(_msg("discord", user="7"), config)


def test_operator_front_ends_are_open_and_admin() -> None:
    """The terminal and the key-protected HTTP API belong to the operator."""
    config = GatewayConfig()
    for platform in ("terminal", "http"):
        assert is_allowed(_msg(platform), config)
        assert is_admin(_msg(platform), config)


def test_admins_are_per_platform() -> None:
    """Admin rights come from the platform's own admins list."""
    config = GatewayConfig(discord=DiscordConfig(allowed_users=["1", "2"], admins=["1"]))
    assert is_admin(_msg("discord", user="1"), config)
    assert not is_admin(_msg("discord", user="2"), config)
