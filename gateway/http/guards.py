"""The `user` field at the Chat Completions door: an end-user id of bounded length (a longer
one is a 400 naming it, rather than a store refusal later), kept as storable text. The body's
schema is `client_request`'s; a message over `gateway.max_message_chars` is the runner's refusal
(`MessageTooLong`, answered 413 by `failures`), as on every platform.
"""

from __future__ import annotations

from gateway.http.error_envelope import ApiError
from state.values import storable_text

__all__ = ["MAX_USER_CHARS", "checked_user"]

MAX_USER_CHARS = 256
"""The body's `user` field: an end-user id (OpenAI API reference), not a document."""


def checked_user(user: str | None) -> str | None:
    if user is not None and len(user) > MAX_USER_CHARS:
        raise ApiError(
            400, f"user: at most {MAX_USER_CHARS} characters, got {len(user):,}", param="user"
        )
    return storable_text(user) if user is not None else None
