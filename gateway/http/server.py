"""The HTTP API's server: an aiohttp app bound to `host:port`, bearer-key auth, the routes.

Each route's handler lives in its own module (`gateway.http.chat` for Chat Completions); this
module owns what every request shares: authentication and the listening socket.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

import structlog
from aiohttp import web

from agent.errors import ConfigError
from gateway.access import DEFAULT_HTTP_KEY
from gateway.http.chat import CREDENTIAL, ChatCompletions
from gateway.http.errors import ApiError, api_error

if TYPE_CHECKING:
    from gateway.run import GatewayRunner

__all__ = ["MAX_BODY_BYTES", "HttpApiServer"]

log = structlog.get_logger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024
STOP_TIMEOUT_S = 5.0
"""How long `stop()` lets open connections finish; the runner drains turns before that."""

_Handler: TypeAlias = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpApiServer:
    """aiohttp server bound to `host:port`; `start()` returns once it listens."""

    name = "http"

    def __init__(self, runner: GatewayRunner, *, host: str, port: int, api_key: str | None) -> None:
        if not api_key:
            raise ConfigError(
                "the HTTP API needs a key: set gateway.http.api_key or HERMES_API_KEY",
                key="gateway.http.api_key",
            )
        self._runner = runner
        self._host, self._port = host, port
        self._api_key = api_key.encode()
        self._chat = ChatCompletions(runner)
        self._site_runner: web.AppRunner | None = None
        self.port: int | None = None

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._errors, self._auth], client_max_size=MAX_BODY_BYTES
        )
        app.router.add_post("/v1/chat/completions", self._chat.handle)
        app.router.add_get("/v1/models", self._models)
        return app

    async def start(self) -> None:
        self._site_runner = web.AppRunner(
            self.app(), access_log=None, shutdown_timeout=STOP_TIMEOUT_S, handle_signals=False
        )
        await self._site_runner.setup()
        site = web.TCPSite(self._site_runner, self._host, self._port)
        await site.start()
        addresses = self._site_runner.addresses
        self.port = int(addresses[0][1]) if addresses else self._port
        log.info("http_api_started", host=self._host, port=self.port)

    async def stop(self) -> None:
        if self._site_runner is not None:
            await self._site_runner.cleanup()
            self._site_runner = None

    @web.middleware
    async def _errors(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return exc.response()

    @web.middleware
    async def _auth(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        given = request.headers.get("Authorization", "")
        token = given.removeprefix("Bearer ").strip().encode()
        if not given.startswith("Bearer ") or not hmac.compare_digest(token, self._api_key):
            return api_error(401, "invalid or missing API key", "authentication_error")
        request[CREDENTIAL] = DEFAULT_HTTP_KEY  # with one key, always it (issue 12: named keys)
        return await handler(request)

    async def _models(self, request: web.Request) -> web.Response:
        model = self._runner.config.model.default
        data = [{"id": model, "object": "model", "created": 0, "owned_by": "hermes"}]
        return web.json_response({"object": "list", "data": data})
