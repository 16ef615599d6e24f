"""Which session a chat message belongs to: a pure decision (who may talk: `gateway.principals`)."""

from __future__ import annotations

from typing import Literal

from gateway.platforms.base import InboundMessage

__all__ = ["chat_key", "memory_owner"]


def chat_key(msg: InboundMessage, *, group_sessions: Literal["per_user", "per_chat"]) -> str:
    """The store's key for the conversation this message belongs to.

    Direct chats: one session per user (over HTTP, per key and `user`). Threads: one per thread. Other group chats: one per user
    per chat, or one per chat when configured.
    """
    chat = msg.chat
    if chat.platform == "http" and msg.credential not in (None, "default"):
        return f"key:{msg.credential}:dm:{msg.user_id}"  # two keys never share a `user`
    if msg.is_direct:
        return f"dm:{msg.user_id}"
    if chat.thread_id is not None:
        return f"chat:{chat.chat_id}:thread:{chat.thread_id}"
    if group_sessions == "per_chat":
        return f"chat:{chat.chat_id}"
    return f"chat:{chat.chat_id}:user:{msg.user_id}"


def memory_owner(msg: InboundMessage, owner: str) -> str | None:
    """Whose memory the conversation of `msg` uses: its person's (`owner`, `Principal.owner`)
    where nobody else reads along (a direct chat, the terminal, an HTTP key); None in a group
    or channel, where the profile and notes would be shown to others."""
    return owner if msg.is_direct else None
