"""What the runner accepts: a message too long to store or to fit the model is refused at the
door, on every platform alike, before a session is created or anything is stored."""

from __future__ import annotations

from agent.errors import MessageTooLong
from agent.tokens import CHARS_PER_TOKEN, estimate_tokens_rough

__all__ = ["WINDOW_SHARE", "check_length"]

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
