"""Checks at the door: the JSON body (well-formed, and nested no deeper than any request needs:
a 10,000-deep array is a 400, never a `RecursionError` answered 500), and the `user` field (an
end-user id of bounded length: a longer one is a 400 naming it, rather than a store refusal
later), kept as storable text. The body's schema is `client_request`'s; a message over
`gateway.max_message_chars` is the runner's refusal (`MessageTooLong`, answered 413 by
`failures`), as on every platform.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from gateway.http.error_envelope import ApiError
from state.values import storable_text

__all__ = ["MAX_JSON_DEPTH", "MAX_USER_CHARS", "checked_user", "read_json"]

MAX_JSON_DEPTH = 64
"""Deeper than any request needs (a tool's JSON schema nests a handful of levels)."""

MAX_USER_CHARS = 256
"""The body's `user` field: an end-user id (OpenAI API reference), not a document."""


def checked_user(user: str | None) -> str | None:
    if user is not None and len(user) > MAX_USER_CHARS:
        raise ApiError(
            400, f"user: at most {MAX_USER_CHARS} characters, got {len(user):,}", param="user"
        )
    return storable_text(user) if user is not None else None


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; ApiError 400 when it is not JSON or nests too deep."""
    try:
        text = await request.text()
    except UnicodeDecodeError:
        raise ApiError(400, "the request body is not valid JSON (not UTF-8)", param=None) from None
    if _depth_over(text, MAX_JSON_DEPTH):  # before parsing: the parser itself would recurse
        raise ApiError(
            400, f"the request body nests deeper than {MAX_JSON_DEPTH} levels", param=None
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise ApiError(400, "the request body is not valid JSON", param=None) from None


def _depth_over(text: str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than `limit` (a linear scan, no parse)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False
