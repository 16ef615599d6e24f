"""The HTTP API's socket: what aiohttp refuses before any route runs answers in the OpenAI
envelope too, slow clients are cut off, and connections beyond a cap get a quick 503.

- aiohttp's parser refusals (a header over `max_field_size`, a malformed request) normally
  answer text/plain from `RequestHandler.handle_error`, outside every middleware; `_ApiProtocol`
  answers them as JSON (431 for an oversized header, RFC 6585 §5; 400 otherwise).
- Headers: aiohttp's keep-alive timer runs from the connection's start until a whole request
  has arrived, so `keepalive_timeout` bounds a slow-header client as well as an idle one. The
  body's own bound is the server's body-read middleware.
- The cap: past `max_connections` open connections a new one is answered 503 with Retry-After
  at once and closed, instead of queueing behind slow ones.
"""

from __future__ import annotations

import asyncio
import json

import structlog
from aiohttp import web
from aiohttp.http_exceptions import LineTooLong

from gateway.http.error_envelope import api_error

__all__ = ["ApiListener"]

log = structlog.get_logger(__name__)

MAX_FIELD_BYTES = 16 * 1024
"""The longest header line (and request line) accepted: 16 KiB, above any real bearer token."""
REFUSAL_LINGER_S = 1.0
"""How long a refused connection stays half-open so the client reads the 503 before the close."""
BUSY_RETRY_AFTER_S = 1


class _ApiProtocol(web.RequestHandler):
    """aiohttp's connection handler, with its own refusals in the OpenAI envelope."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # as aiohttp: too late for another response
            raise ConnectionError("a response was already sent; cannot send the error")
        oversized = isinstance(exc, LineTooLong) or "Too many headers" in (message or "")
        if oversized:
            status, text = 431, "a request header (or the request line) is too large"
        elif status >= 500:
            text = "the server failed on this request; its log has the details"
            log.error("http_request_failed", exc_info=exc)
        else:
            text = "the request is not valid HTTP"
        if status < 500:
            log.info("http_request_refused", status=status, reason=type(exc).__name__)
        kind = "server_error" if status >= 500 else "invalid_request_error"
        response = api_error(status, text, kind)
        response.force_close()
        return response


class _Refusal(asyncio.Protocol):
    """A connection over the cap: a 503 at once, then the close (after a moment half-closed,
    so a client still sending its request reads the answer rather than a reset)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_BUSY_RESPONSE)
        if transport.can_write_eof():
            transport.write_eof()
        self._timer = self._loop.call_later(REFUSAL_LINGER_S, transport.close)

    def data_received(self, data: bytes) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _busy_response() -> bytes:
    body = json.dumps(
        {
            "error": {
                "message": "the server has too many open connections; retry shortly",
                "type": "service_unavailable",
                "param": None,
                "code": "too_many_connections",
            }
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Retry-After: {BUSY_RETRY_AFTER_S}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


_BUSY_RESPONSE = _busy_response()


class ApiListener:
    """Serves an `AppRunner`'s app on `host:port` with the protocol above and the cap."""

    def __init__(
        self,
        runner: web.AppRunner,
        *,
        max_connections: int,
        header_timeout_s: float,
    ) -> None:
        self._runner = runner
        self._cap = max_connections
        self._header_timeout_s = header_timeout_s
        self._server: asyncio.Server | None = None
        self.refused = 0
        """Connections answered 503 for the cap (the tests read it)."""

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port."""
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None, "setup() the AppRunner first"

        def protocol() -> asyncio.Protocol:
            if len(server.connections) >= self._cap:
                self.refused += 1
                return _Refusal(loop)
            return _ApiProtocol(
                server,
                loop=loop,
                access_log=None,  # type: ignore[arg-type]  # None: no access log (aiohttp)
                keepalive_timeout=self._header_timeout_s,
                max_line_size=MAX_FIELD_BYTES,
                max_field_size=MAX_FIELD_BYTES,
                lingering_time=min(self._header_timeout_s, 5.0),
            )

        self._server = await loop.create_server(protocol, host, port, reuse_address=True)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop accepting; the AppRunner's cleanup closes the open connections."""
        if self._server is not None:
            self._server.close()
            self._server = None
