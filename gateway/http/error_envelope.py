"""The OpenAI error envelope: every refusal the HTTP API makes has this shape.

`{"error": {"message", "type", "param", "code"}}` (OpenAI API reference, "Error codes"); the
openai SDK reads `error.message` into the exception it raises, so the message must say what to
do, in a sentence, with no library internals.
"""

from __future__ import annotations

from aiohttp import web

__all__ = ["ApiError", "api_error"]


class ApiError(Exception):
    """Raised inside a handler; the server answers it with `api_error`."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
        self.param, self.code, self.headers = param, code, headers or {}

    def body(self) -> dict[str, dict[str, str | None]]:
        """The envelope itself (an SSE error event carries it once a stream has started)."""
        return _envelope(self.message, self.kind, self.param, self.code)

    def response(self) -> web.Response:
        return api_error(
            self.status,
            self.message,
            self.kind,
            param=self.param,
            code=self.code,
            headers=self.headers,
        )


def api_error(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = _envelope(message, kind, param, code)
    return web.json_response(body, status=status, headers=headers)


def _envelope(
    message: str, kind: str, param: str | None, code: str | None
) -> dict[str, dict[str, str | None]]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
