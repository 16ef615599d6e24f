"""The OpenAI-compatible HTTP API: `server` (app, auth, routes), `chat` (Chat Completions),
`errors` (the OpenAI error envelope every refusal uses)."""

from gateway.http.chat import SESSION_HEADER
from gateway.http.server import HttpApiServer

__all__ = ["SESSION_HEADER", "HttpApiServer"]
