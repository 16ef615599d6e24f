"""FakeLLM: the one fake model server, an aiohttp app on 127.0.0.1 serving every wire format.

Routes: POST /v1/messages (+ /count_tokens), POST /v1/chat/completions, POST {prefix}/responses
(/v1, /backend-api/codex, any relay path), and the local-server probes GET /v1/models and
GET /props. Every model request runs the same steps: record it, check its key and body like the
real service (`_http`, then the wire's own checks), take the next turn (the `responder`, else
the script, else an echo of the last user text), wait the turn's and the server's latency, then
answer an error envelope or the wire's reply, JSON or SSE.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from aiohttp import web

from sim.llm_server._anthropic import AnthropicWire
from sim.llm_server._http import (
    body_refusal,
    error_response,
    header_refusal,
    json_response,
    key_refusal,
    presented_key,
    read_json,
    request_id_headers,
    send_sse,
)
from sim.llm_server._openai_chat import ChatWire
from sim.llm_server._responses import ResponsesWire
from sim.llm_server._values import (
    ErrorReply,
    Exchange,
    Family,
    RecordedRequest,
    ReplyParts,
    Responder,
    Turn,
    Wire,
)
from sim.llm_server._window import OverflowStyle, overflow_error

if TYPE_CHECKING:
    import httpx2

__all__ = ["MAX_REQUEST_BYTES", "FakeLLM"]

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The Messages API's request size limit (docs.anthropic.com/en/api/overview#request-size-limits)."""


class FakeLLM:
    """Every model wire format on 127.0.0.1:0; use as `async with FakeLLM() as fake`."""

    def __init__(
        self,
        *,
        expected_key: str | None = None,
        min_cache_tokens: int = 0,
        responder: Responder | None = None,
        models: dict[str, dict[str, Any]] | None = None,
        n_ctx: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        latency_s: float = 0.0,
        record_bodies: bool = True,
        reject_context_management: bool = False,
        window_tokens: int | None = None,
        overflow: OverflowStyle = "anthropic",
        token_scale: float = 1.0,
        slots: int | None = None,
    ) -> None:
        self.expected_key = expected_key
        """None accepts any key, but a model request must still present one."""
        self.min_cache_tokens = min_cache_tokens
        self.responder = responder
        self.models = models or {}
        """Served by GET /v1/models: model id -> extra metadata fields (e.g. context_length)."""
        self.n_ctx = n_ctx
        """Served by GET /props as default_generation_settings.n_ctx; None -> 404."""
        self.ollama: dict[str, dict[str, Any]] = {}
        """Ollama's own API: model name -> {"context_length": N} for a loaded model (`/api/ps`),
        {"num_ctx": N} set among its parameters (`/api/show`); no entry -> 404 as Ollama does."""
        self.lmstudio: dict[str, dict[str, Any]] = {}
        """LM Studio's `/api/v0/models/{model}`: model id -> its fields (loaded_context_length)."""
        self.clock = clock
        self.latency_s = latency_s
        """Added before every model reply: a simulated model's think time."""
        self.record_bodies = record_bodies
        """False keeps `requests` small on long runs (bodies become None; usage is still kept)."""
        self.reject_context_management = reject_context_management
        """Responses: answer any request carrying `context_management` with a structured 400."""
        self.window_tokens = window_tokens
        """The model's window: larger requests get the `overflow` server's real error."""
        self.overflow: OverflowStyle = overflow
        self.busy_s = 0.0
        """Wall time spent inside the model handlers, simulated latency included."""
        self.latency_total_s = 0.0
        """The part of `busy_s` that was deliberate latency (`latency_s` and `Turn.delay_s`)."""
        self.usages: list[dict[str, Any]] = []
        """The usage block of every model reply, in order."""
        self.requests: list[RecordedRequest] = []
        self.timeline: list[str] = []
        """"request" as each model request arrives, "abandoned" when a client hangs up on a
        stalled stream: the order shows whether a retry waited for the cancel."""
        self._slots = None if slots is None else asyncio.Semaphore(slots)
        """Model requests served at once, as a local server's slots (llama.cpp `--parallel`):
        the others wait their turn, first come first served; a client that hangs up, waiting or
        being served, frees its place at once (llama.cpp drops a task whose connection closed).
        None: any number."""
        self.dropped = 0
        """Requests whose client hung up before their answer (only counted with `slots`)."""
        self._script: deque[Turn] = deque()
        self._ids = itertools.count(1)
        self._request_ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._closing = asyncio.Event()
        """Set on exit: stalled streams end so the server can stop."""
        self._anthropic = AnthropicWire()
        self._wires: tuple[Wire, ...] = (
            self._anthropic,
            ChatWire(token_scale=token_scale),
            ResponsesWire(),
        )
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        """The SDK appends /v1/messages to the host root."""
        return self.url

    @property
    def openai_base_url(self) -> str:
        """The SDK appends /chat/completions or /responses to .../v1."""
        return self.url + "/v1"

    @property
    def codex_base_url(self) -> str:
        return self.url + "/backend-api/codex"

    async def __aenter__(self) -> Self:
        anthropic, chat, responses = self._wires
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/v1/messages", self._handler(anthropic))
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_post("/v1/chat/completions", self._handler(chat))
        app.router.add_post("/{prefix:.*}/responses", self._handler(responses))
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._props)
        app.router.add_get("/api/ps", self._ollama_ps)
        app.router.add_post("/api/show", self._ollama_show)
        app.router.add_get("/api/v0/models/{model}", self._lmstudio_model)
        self._runner = web.AppRunner(
            app,
            shutdown_timeout=0.1,
            handle_signals=False,
            access_log=None,
            handler_cancellation=self._slots is not None,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def script(self, *turns: Turn) -> None:
        """Queue replies; each model request takes the next one (after the responder declines)."""
        self._script.extend(turns)

    async def wait_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:  # noqa: ASYNC109
        """Wait until at least `n` requests were recorded; return them all."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.requests) >= n)
        return list(self.requests)

    def assert_complete(self) -> None:
        """Every scripted turn was consumed."""
        left = list(self._script)
        assert not left, f"{len(left)} scripted turn(s) never requested: {left}"

    def api_requests(self, api: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.api == api]

    def http_client_for(self, url: str) -> httpx2.AsyncClient:
        """A client for the SDK: requests to `url`'s host arrive here with their Host intact."""
        import httpx2

        from sim.llm_server._redirect import HostRedirect

        expected = (urlsplit(url).hostname or "").lower()
        return httpx2.AsyncClient(transport=HostRedirect(self.port, expected))

    # --- handlers --------------------------------------------------------------------------

    def _handler(self, wire: Wire) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            started = time.perf_counter()
            try:
                if self._slots is None:
                    return await self._serve(request, wire)
                async with self._slots:
                    return await self._serve(request, wire)
            except asyncio.CancelledError:  # with `slots`: the client hung up
                self.dropped += 1
                self.timeline.append("dropped")
                raise
            finally:
                self.busy_s += time.perf_counter() - started

        return handle

    async def _serve(self, request: web.Request, wire: Wire) -> web.StreamResponse:
        body, key, refusal = await self._admit(request, wire.api, wire.family, key_required=True)
        exchange = Exchange(
            key=key,
            host=_host(request),
            clock=self.clock,
            min_cache_tokens=self.min_cache_tokens,
            reject_context_management=self.reject_context_management,
            new_id=self._ids.__next__,
        )
        refusal = refusal or wire.refuse(body, exchange) or self._overflow(wire, body)
        if refusal is not None:
            return self._error(wire.family, refusal)
        turn = await self._next_turn(body, wire)
        if turn.error is not None:
            return self._error(wire.family, _scripted_error(turn, turn.error))
        if turn.raw_body is not None:
            return web.Response(text=turn.raw_body, content_type=turn.raw_content_type)
        parts = _within_max_tokens(self._reply_parts(turn, wire.call_prefix), body)
        answer = wire.answer(body, parts, exchange)
        self.usages.append(answer.usage)
        headers = {**request_id_headers(wire.family, self._request_id()), **answer.headers}
        if answer.json is not None:
            return json_response(answer.json, headers)
        frames = answer.frames
        if turn.cut_after_events is not None:
            frames = list(frames)[: turn.cut_after_events]
        return await send_sse(
            request,
            frames,
            headers,
            stall_after=turn.stall_after_events,
            release=turn.release,
            event_delay_s=turn.event_delay_s,
            closing=self._closing,
            on_abandoned=lambda: self.timeline.append("abandoned"),
        )

    def _overflow(self, wire: Wire, body: dict[str, Any]) -> ErrorReply | None:
        if self.window_tokens is None:
            return None
        prompt = wire.prompt_tokens(body)
        return overflow_error(
            self.overflow, window=self.window_tokens, prompt_tokens=prompt, body=body
        )

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        body, _, refusal = await self._admit(
            request, "anthropic_count", "anthropic", key_required=True
        )
        counted = refusal or self._anthropic.count(body)
        if isinstance(counted, ErrorReply):
            return self._error("anthropic", counted)
        return json_response(counted)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        """Both vendors list models here; local servers (llama.cpp, vLLM) need no key."""
        family: Family = "anthropic" if "anthropic-version" in request.headers else "openai"
        _, _, refusal = await self._admit(request, "models", family, key_required=False)
        if refusal is not None:
            return self._error(family, refusal)
        data = [
            {
                "id": name,
                "object": "model",
                "type": "model",
                "created": 0,
                "owned_by": "fake",
                "display_name": name,
                "created_at": "2025-01-01T00:00:00Z",
                **meta,
            }
            for name, meta in self.models.items()
        ]
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        return json_response(
            {"object": "list", "data": data, "has_more": False, "first_id": first, "last_id": last}
        )

    async def _ollama_ps(self, request: web.Request) -> web.StreamResponse:
        """Ollama `GET /api/ps`: the loaded models (docs/api.md, "List Running Models")."""
        await self._record(request, "ollama", None)
        if not self.ollama:
            return json_response({"error": "not found"}, status=404)
        loaded = [
            {"name": name, "model": name, "context_length": fields["context_length"]}
            for name, fields in self.ollama.items()
            if "context_length" in fields
        ]
        return json_response({"models": loaded})

    async def _ollama_show(self, request: web.Request) -> web.StreamResponse:
        """Ollama `POST /api/show` {"model"}: `parameters` is Modelfile text (`num_ctx 8192`)."""
        body = await read_json(request)
        await self._record(request, "ollama", body if isinstance(body, dict) else None)
        name = body.get("model") if isinstance(body, dict) else None
        fields = self.ollama.get(name) if isinstance(name, str) else None
        if fields is None:
            return json_response({"error": f"model '{name}' not found"}, status=404)
        params = f"num_ctx {fields['num_ctx']}" if "num_ctx" in fields else ""
        return json_response({"parameters": params, "model_info": {}, "details": {}})

    async def _lmstudio_model(self, request: web.Request) -> web.StreamResponse:
        """LM Studio `GET /api/v0/models/{model}` (LM Studio REST API v0)."""
        await self._record(request, "lmstudio", None)
        fields = self.lmstudio.get(request.match_info["model"])
        if fields is None:
            return json_response({"error": "model not found"}, status=404)
        return json_response({"id": request.match_info["model"], "object": "model", **fields})

    async def _props(self, request: web.Request) -> web.StreamResponse:
        await self._record(request, "props", None)
        if self.n_ctx is None:
            return json_response({"error": "not found"}, status=404)
        return json_response(
            {"default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": 1}
        )

    # --- steps -----------------------------------------------------------------------------

    async def _admit(
        self, request: web.Request, api: str, family: Family, *, key_required: bool
    ) -> tuple[dict[str, Any], str, ErrorReply | None]:
        """Record the request, then check key, headers and body; (body, key, refusal)."""
        value = await read_json(request) if request.method == "POST" else None
        body = value if isinstance(value, dict) else {}
        await self._record(request, api, value if isinstance(value, dict) else None)
        key = presented_key(request, family)
        refusal = key_refusal(family, key, self.expected_key, required=key_required)
        if refusal is None and request.method == "POST":
            refusal = header_refusal(family, request.headers) or body_refusal(family, value)
        return body, key, refusal

    async def _record(self, request: web.Request, api: str, body: dict[str, Any] | None) -> None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        kept = body if self.record_bodies else None
        recorded = RecordedRequest(
            api=api, path=request.path, host=_host(request), headers=headers, json=kept
        )
        async with self._changed:
            self.requests.append(recorded)
            self.timeline.append("request")
            self._changed.notify_all()

    async def _next_turn(self, body: dict[str, Any], wire: Wire) -> Turn:
        turn = self.responder(body, wire.api) if self.responder else None
        if turn is None and self._script:
            turn = self._script.popleft()
        if turn is None:
            turn = Turn(text=f"echo: {wire.user_text(body)}")
        delay_s = turn.delay_s + self.latency_s
        if delay_s:
            self.latency_total_s += delay_s
            await asyncio.sleep(delay_s)
        return turn

    def _reply_parts(self, turn: Turn, prefix: str) -> ReplyParts:
        calls = [
            (c.id or f"{prefix}_fake_{next(self._ids):04d}", c.name, c.arguments)
            for c in turn.tool_calls
        ]
        return ReplyParts(
            text=turn.text,
            tool_calls=calls,
            stop=turn.stop or ("tool_use" if calls else "end"),
            reasoning=turn.reasoning,
            compaction=turn.compaction,
        )

    def _error(self, family: Family, error: ErrorReply) -> web.Response:
        return error_response(family, error, self._request_id())

    def _request_id(self) -> str:
        return f"req_fake_{next(self._request_ids):04d}"


def _within_max_tokens(parts: ReplyParts, body: dict[str, Any]) -> ReplyParts:
    """Real models stop at the request's output limit and say so (Anthropic `max_tokens`,
    OpenAI `finish_reason: length`, Responses `incomplete`); the fake does too."""
    limit = next(
        (
            value
            for key in ("max_tokens", "max_completion_tokens", "max_output_tokens")
            if isinstance(value := body.get(key), int) and not isinstance(value, bool)
        ),
        None,
    )
    if limit is None or parts.output_tokens <= limit or parts.tool_calls:
        return parts
    return replace(parts, text=parts.text[: max(1, limit) * 4], stop="max_tokens")


def _scripted_error(turn: Turn, error: tuple[int, str, str]) -> ErrorReply:
    status, kind, message = error
    return ErrorReply(
        status=status,
        type=kind,
        message=message,
        param=turn.error_param,
        code=turn.error_code,
        retry_after_ms=turn.retry_after_ms,
    )


def _host(request: web.Request) -> str:
    return request.headers.get("Host", "").lower()
