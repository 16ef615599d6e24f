"""What the runner accepts: a message too long to store or to fit the model is refused at the
door, on every platform alike, before a session is created or anything is stored; a sender
who is not allowed hears so in a direct chat, and nothing is ever posted about them in a group."""

from __future__ import annotations

import contextlib

import structlog

from agent.errors import HermesError, MessageTooLong
from agent.tokens import CHARS_PER_TOKEN, estimate_tokens_rough
from gateway.platforms.base import InboundMessage, PlatformAdapter

__all__ = ["WINDOW_SHARE", "check_length", "refuse_stranger", "refusal_text"]

log = structlog.get_logger(__name__)

WINDOW_SHARE = 0.5
"""A message may take at most this share of the model's window: the rest must hold the
system prompt, the compacted history and the reply."""


def check_length(text: str, *, max_chars: int, context_length: int) -> None:
    """Raise MessageTooLong when `text` is over `max_chars` or would need more than
    `WINDOW_SHARE` of the window (counted as the compressor counts: about 4 chars a token)."""
    if len(text) > max_chars:
        raise MessageTooLong(len(text), max_chars, why="gateway.max_message_chars")
    budget = int(context_length * WINDOW_SHARE)
    if estimate_tokens_rough(text) > budget:
        raise MessageTooLong(
            len(text), budget * CHARS_PER_TOKEN, why=f"the model's {context_length:,}-token window"
        )


def refusal_text(user_id: str) -> str:
    """What a sender who is not on the allowlist is told (in a direct chat only)."""
    return (
        f"Sorry, this assistant only talks to people on its allowlist. Your user id is {user_id}."
    )


async def refuse_stranger(adapter: PlatformAdapter, message: InboundMessage) -> None:
    """Tell a sender who is not allowed, with their user id (what the operator must add), in
    their direct chat; in a group nothing is posted (their id is nobody else's business, and
    a bot that answers every stranger in a group is noise)."""
    if not message.is_direct:
        log.info("group_refusal_withheld", platform=message.chat.platform)
        return
    with contextlib.suppress(HermesError):
        for piece in adapter.render(refusal_text(message.user_id)):
            await adapter.send(message.chat, piece)
