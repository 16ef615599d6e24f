"""Which session a chat message belongs to, and who may talk to the bot: pure decisions."""

from __future__ import annotations

from typing import Literal, assert_never

from agent.config import DiscordConfig, GatewayConfig, TelegramConfig
from gateway.platforms.base import InboundMessage, PlatformName

__all__ = ["chat_key", "is_admin", "is_allowed"]

_OPEN_PLATFORMS = frozenset({"terminal", "http"})
"""The operator's own front ends: the terminal is local, the HTTP API checks its key itself."""


def chat_key(msg: InboundMessage, *, group_sessions: Literal["per_user", "per_chat"]) -> str:
    """The store's key for the conversation this message belongs to.

    Direct chats: one session per user. Threads: one per thread. Other group chats: one per user
    per chat, or one per chat when configured.
    """
    chat = msg.chat
    if msg.is_direct:
        return f"dm:{msg.user_id}"
    if chat.thread_id is not None:
        return f"chat:{chat.chat_id}:thread:{chat.thread_id}"
    if group_sessions == "per_chat":
        return f"chat:{chat.chat_id}"
    return f"chat:{chat.chat_id}:user:{msg.user_id}"


def is_allowed(msg: InboundMessage, config: GatewayConfig) -> bool:
    """Unknown users are refused on chat platforms until an allowlist names them."""
    platform = msg.chat.platform
    if platform in _OPEN_PLATFORMS:
        return True
    allowed = _section(platform, config).allowed_users
    return msg.user_id in allowed


def is_admin(msg: InboundMessage, config: GatewayConfig) -> bool:
    """Admins may change the model; the terminal and HTTP API belong to the operator."""
    platform = msg.chat.platform
    if platform in _OPEN_PLATFORMS:
        return True
    return msg.user_id in _section(platform, config).admins


def _section(platform: PlatformName, config: GatewayConfig) -> TelegramConfig | DiscordConfig:
    match platform:
        case "telegram":
            return config.telegram
        case "discord":
            return config.discord
        case "http" | "terminal":
            raise ValueError(f"no access section for platform {platform!r}")
        case unreachable:
            assert_never(unreachable)
