"""The HTTP API's server: an aiohttp app bound to `host:port`, bearer-key auth, the routes.

Each route's handler lives in its own module (`gateway.http.chat` for Chat Completions); this
module owns what every request shares: the error envelope for every refusal (aiohttp's own
404/405/413 included), the body's read timeout, CORS, authentication, and the unauthenticated
`/health` and `/ready`. The socket itself (timeouts, the connection cap) is `transport`'s.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeAlias

import structlog
from aiohttp import web

from gateway.http.chat import CREDENTIAL, SESSION_HEADER, ChatCompletions
from gateway.http.error_envelope import ApiError, api_error
from gateway.http.keys import match_key, resolve_keys
from gateway.http.model_routes import ModelRoutes
from gateway.http.readiness import Readiness
from gateway.http.responses import Responses
from gateway.http.transport import ApiListener

if TYPE_CHECKING:
    from gateway.run import GatewayRunner

__all__ = ["MAX_BODY_BYTES", "HttpApiServer"]

log = structlog.get_logger(__name__)

MAX_BODY_BYTES = 28 * 1024 * 1024
"""Room for one 20 MB image as a base64 data URL (4/3 larger) and the JSON around it; text is
held to `gateway.max_message_chars` apart."""
STOP_TIMEOUT_S = 5.0
"""How long `stop()` lets open connections finish; the runner drains turns before that."""
READY_TIMEOUT_S = 2.0
"""`/ready` asks the store one cheap question within this."""
DRAINING_RETRY_AFTER_S = "5"
PUBLIC_PATHS = frozenset({"/health", "/ready"})
CORS_METHODS = "GET, POST, OPTIONS"
CORS_HEADERS = f"Authorization, Content-Type, {SESSION_HEADER}"
CORS_MAX_AGE_S = "600"

_Handler: TypeAlias = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpApiServer:
    """aiohttp server bound to `host:port`; `start()` returns once it listens."""

    name = "http"

    def __init__(
        self,
        runner: GatewayRunner,
        *,
        host: str,
        port: int,
        api_key: str | None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        environ = os.environ if environ is None else environ
        config = runner.config.gateway.http
        self._keys = resolve_keys(config, api_key, environ)
        self._runner = runner
        self._config = config
        self._host, self._port = host, port
        intake = runner.media_intake
        self._models = ModelRoutes(
            runner.config, environ, media=intake.media if intake is not None else None
        )
        self._chat = ChatCompletions(runner, self._models)
        self.readiness = Readiness(runner, timeout_s=READY_TIMEOUT_S)
        self._site_runner: web.AppRunner | None = None
        self._listener: ApiListener | None = None
        self.port: int | None = None

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._errors, self._cors, self._auth, self._body],
            client_max_size=MAX_BODY_BYTES,
        )
        app.router.add_post("/v1/chat/completions", self._chat.handle)
        app.router.add_get("/v1/models", self._list_models)
        app.router.add_get("/v1/models/{id}", self._get_model)
        app.router.add_post(
            "/v1/responses", Responses(self._runner, self._chat.conversations, self._models).handle
        )
        app.router.add_get("/health", self._health)
        app.router.add_get("/ready", self._ready)
        app.on_response_prepare.append(self._cors_headers)
        return app

    async def start(self) -> None:
        self._site_runner = web.AppRunner(
            self.app(), access_log=None, shutdown_timeout=STOP_TIMEOUT_S, handle_signals=False
        )
        await self._site_runner.setup()
        self._listener = ApiListener(
            self._site_runner,
            max_connections=self._config.max_connections,
            header_timeout_s=self._config.read_timeout_s,
        )
        self.port = await self._listener.start(self._host, self._port)
        log.info("http_api_started", host=self._host, port=self.port)

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        if self._site_runner is not None:
            await self._site_runner.cleanup()
            self._site_runner = None
        await self._models.aclose()

    @property
    def refused_connections(self) -> int:
        return self._listener.refused if self._listener is not None else 0

    @property
    def open_connections(self) -> int:
        server = self._site_runner.server if self._site_runner is not None else None
        return len(server.connections) if server is not None else 0

    # ---- middlewares, outermost first ----------------------------------------------------

    @web.middleware
    async def _errors(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        """Every refusal in the envelope: ours, and aiohttp's (unknown route, wrong method,
        body too large), which would otherwise answer text/plain."""
        try:
            return await handler(request)
        except ApiError as exc:
            return exc.response()
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _http_exception(exc, request)

    @web.middleware
    async def _cors(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        """CORS for `gateway.http.cors_origins` (Fetch standard, "CORS protocol"): a preflight
        from an allowed origin answers 204 without a key; `_cors_headers` marks every answer."""
        origin = request.headers.get("Origin")
        preflight = request.method == "OPTIONS" and "Access-Control-Request-Method" in (
            request.headers
        )
        if not (preflight and origin is not None and self._allows(origin)):
            return await handler(request)
        response = web.Response(status=204)
        response.headers.update(
            {
                "Access-Control-Allow-Methods": CORS_METHODS,
                "Access-Control-Allow-Headers": CORS_HEADERS,
                "Access-Control-Max-Age": CORS_MAX_AGE_S,
            }
        )
        return response

    async def _cors_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every answer to an allowed origin, streams and refusals included, as its headers go
        out (aiohttp's `on_response_prepare`)."""
        origin = request.headers.get("Origin")
        if origin is not None and self._allows(origin):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = SESSION_HEADER
            response.headers["Vary"] = "Origin"

    def _allows(self, origin: str) -> bool:
        origins = self._config.cors_origins
        return "*" in origins or origin in origins

    @web.middleware
    async def _auth(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        if request.path in PUBLIC_PATHS:
            return await handler(request)
        name = match_key(self._keys, request.headers.get("Authorization", ""))
        if name is None:
            return api_error(401, "invalid or missing API key", "authentication_error")
        request[CREDENTIAL] = name
        return await handler(request)

    @web.middleware
    async def _body(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        """The body arrives within `read_timeout_s` (a slow-body client is cut off) and within
        the size limit, before any handler reads it (aiohttp keeps what was read)."""
        if request.can_read_body:
            try:
                async with asyncio.timeout(self._config.read_timeout_s):
                    await request.read()
            except TimeoutError:
                log.info("http_slow_body_cut", path=request.path)
                response = api_error(
                    408,
                    f"the request body did not arrive within {self._config.read_timeout_s:g} s",
                )
                # Answer now and drop the connection: aiohttp would otherwise linger reading
                # the rest of a body that is not coming.
                await response.prepare(request)
                await response.write_eof()
                if request.protocol is not None:
                    request.protocol.force_close()
                return response
        if not self._runner.accepting and request.path not in PUBLIC_PATHS:
            raise ApiError(
                503,
                "the server is shutting down; retry against another instance or shortly",
                "service_unavailable",
                code="draining",
                headers={"Retry-After": DRAINING_RETRY_AFTER_S},
            )
        return await handler(request)

    # ---- routes ----------------------------------------------------------------------------

    async def _list_models(self, request: web.Request) -> web.Response:
        data = [self._models.card(name) for name in self._models.names]
        return web.json_response({"object": "list", "data": data})

    async def _get_model(self, request: web.Request) -> web.Response:
        name = request.match_info["id"]
        card = self._models.card(name)
        if card is None:
            raise ApiError(
                404,
                f"model {name!r} is not served here; GET /v1/models lists the served ones",
                param="model",
                code="model_not_found",
            )
        return web.json_response(card)

    async def _health(self, request: web.Request) -> web.Response:
        """Liveness: the process answers."""
        return web.json_response({"status": "ok"})

    async def _ready(self, request: web.Request) -> web.Response:
        """Readiness (`gateway.http.readiness`): turns accepted, a model configured, the store
        answering with room on its disk, the model endpoint answering."""
        problem = await self.readiness.problem()
        if problem is not None:
            return web.json_response(
                {"status": "unavailable", "reason": problem},
                status=503,
                headers={"Retry-After": DRAINING_RETRY_AFTER_S},
            )
        return web.json_response({"status": "ready", "model": self._runner.config.model.default})


def _http_exception(exc: web.HTTPException, request: web.Request) -> web.Response:
    """aiohttp's refusal as an envelope, keeping its status and `Allow`."""
    match exc.status:
        case 404:
            message, kind = f"no route {request.method} {request.path}", "not_found_error"
        case 405:
            allowed = exc.headers.get("Allow", "")
            message = f"{request.method} is not allowed on {request.path} (allowed: {allowed})"
            kind = "invalid_request_error"
        case 413:
            message = (
                f"the request body is larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB "
                "(an image may be at most 20 MB)"
            )
            kind = "invalid_request_error"
        case _:
            message, kind = exc.reason, "invalid_request_error"
    headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
    response = api_error(exc.status, message, kind, headers=headers)
    if exc.status == 413:
        response.force_close()  # the rest of the body is not worth reading
    return response
