"""FakeLLM: Anthropic Messages and OpenAI Chat Completions on 127.0.0.1, with prompt-cache emulation.

Scripted turns (`fake.script(Turn(...))`), a `responder` hook for dynamic replies, or an echo of
the last user text. Token counts are ceil(chars / 4) of each prompt block, so tests can assert
exact numbers; see `sim._wire` for the payload builders and the cache arithmetic. The cache TTL
runs on an injectable clock (`ManualClock` for simulated time). It ships with the product because
`hermes demo` and the replay benchmark drive the real runtime against it; the tests use it too.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from aiohttp import web

from sim._wire import (
    TTL_SECONDS,
    ReplyParts,
    anthropic_events,
    anthropic_message,
    anthropic_prompt_blocks,
    canonical_json,
    openai_chunks,
    openai_completion,
    openai_prompt_blocks,
    plan_anthropic_cache,
    prefix_digests,
    tokens_of_text,
    validate_anthropic,
    validate_openai,
)

__all__ = ["FakeLLM", "ManualClock", "RecordedRequest", "ToolCallSpec", "Turn"]

Responder = Callable[[dict[str, Any], str], "Turn | None"]


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """A tool call the fake model makes; `arguments` is JSON text (it may be invalid on purpose)."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One scripted reply: text and/or tool calls, or an error; optionally delayed."""

    text: str = ""
    tool_calls: Sequence[ToolCallSpec] = ()
    error: tuple[int, str, str] | None = None
    """(HTTP status, API error type, message)."""
    delay_s: float = 0.0
    retry_after_ms: int | None = 10
    """Sent as `retry-after-ms` on 429 and 5xx errors."""
    stop: Literal["end", "tool_use", "max_tokens"] | None = None
    """Override the stop reason (default: tool_use when there are tool calls, else end)."""
    stall_after_events: int | None = None
    """Streamed replies only: send this many SSE events, then go silent with the socket open."""
    event_delay_s: float = 0.0
    """Streamed replies only: pause this long before each SSE event (slow but never silent)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One request exactly as the client sent it."""

    api: str
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None


@dataclass(slots=True)
class ManualClock:
    """An injectable monotonic clock for TTL tests: `fake.clock = clock; clock.advance(301)`."""

    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(slots=True)
class _CacheEntry:
    tokens: int
    ttl: str
    expires_at: float


@dataclass(slots=True)
class _State:
    script: deque[Turn] = field(default_factory=deque)
    anthropic_cache: dict[str, _CacheEntry] = field(default_factory=dict)
    openai_prefixes: set[str] = field(default_factory=set)


class FakeLLM:
    """Both LLM wire formats on 127.0.0.1:0; use as `async with FakeLLM() as fake`."""

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
    ) -> None:
        self.expected_key = expected_key
        self.min_cache_tokens = min_cache_tokens
        self.responder = responder
        self.models = models or {}
        """Served by GET /v1/models: model id -> extra metadata fields (e.g. context_length)."""
        self.n_ctx = n_ctx
        """Served by GET /props as default_generation_settings.n_ctx; None -> 404."""
        self.clock = clock
        self.latency_s = latency_s
        """Added before every model reply: a simulated model's think time."""
        self.record_bodies = record_bodies
        """False keeps `requests` small on long runs (bodies become None; usage is still kept)."""
        self.busy_s = 0.0
        """Wall time spent inside the model handlers, simulated latency included."""
        self.latency_total_s = 0.0
        """The part of `busy_s` that was deliberate latency (`latency_s` and `Turn.delay_s`)."""
        self.usages: list[dict[str, Any]] = []
        """The usage block of every model reply, in order."""
        self.requests: list[RecordedRequest] = []
        self._state = _State()
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._closing = asyncio.Event()
        """Set on exit: stalled streams end so the server can stop."""
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._props)
        self._runner = web.AppRunner(
            app, shutdown_timeout=0.1, handle_signals=False, access_log=None
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
        """Queue replies; each request takes the next one (after the responder declines)."""
        self._state.script.extend(turns)

    async def wait_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:  # noqa: ASYNC109
        """Wait until at least `n` requests were recorded; return them all."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.requests) >= n)
        return list(self.requests)

    def assert_complete(self) -> None:
        """Every scripted turn was consumed."""
        left = list(self._state.script)
        assert not left, f"{len(left)} scripted turn(s) never requested: {left}"

    def api_requests(self, api: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.api == api]

    # --- handlers --------------------------------------------------------------------------

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            return await self._anthropic_reply(request)
        finally:
            self.busy_s += time.perf_counter() - started

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            return await self._openai_reply(request)
        finally:
            self.busy_s += time.perf_counter() - started

    async def _anthropic_reply(self, request: web.Request) -> web.StreamResponse:
        body, refusal = await self._admit(request, "anthropic")
        if refusal is not None:
            return refusal
        problem = validate_anthropic(body)
        if problem:
            return _error("anthropic", 400, "invalid_request_error", problem)
        turn = await self._next_turn(body, "anthropic")
        if turn.error is not None:
            return _error("anthropic", *turn.error, retry_after_ms=turn.retry_after_ms)
        reply = self._reply_parts(turn, "toolu")
        usage = self._anthropic_usage(body, _auth_key(request), reply)
        self.usages.append(usage)
        message = anthropic_message(
            message_id=f"msg_fake_{next(self._ids):04d}",
            model=body["model"],
            reply=reply,
            usage=usage,
        )
        if not body.get("stream"):
            return _json(message, {"request-id": message["id"]})
        frames = [
            f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
            for event, data in anthropic_events(message)
        ]
        return await self._stream(request, frames, turn)

    async def _openai_reply(self, request: web.Request) -> web.StreamResponse:
        body, refusal = await self._admit(request, "openai")
        if refusal is not None:
            return refusal
        problem = validate_openai(body)
        if problem:
            return _error("openai", 400, "invalid_request_error", problem)
        turn = await self._next_turn(body, "openai")
        if turn.error is not None:
            return _error("openai", *turn.error, retry_after_ms=turn.retry_after_ms)
        reply = self._reply_parts(turn, "call")
        usage = self._openai_usage(body, _auth_key(request), reply)
        self.usages.append(usage)
        ident = dict(completion_id=f"chatcmpl-fake{next(self._ids):04d}", model=body["model"])
        created = int(time.time())
        if not body.get("stream"):
            return _json(openai_completion(**ident, created=created, reply=reply, usage=usage))
        include = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = openai_chunks(
            **ident, created=created, reply=reply, usage=usage if include else None
        )
        frames = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        return await self._stream(request, [*frames, b"data: [DONE]\n\n"], turn)

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        body, refusal = await self._admit(request, "anthropic_count")
        if refusal is not None:
            return refusal
        blocks = anthropic_prompt_blocks(body)
        return _json({"input_tokens": sum(b.tokens for b in blocks)})

    async def _models(self, request: web.Request) -> web.StreamResponse:
        _, refusal = await self._admit(request, "models")
        if refusal is not None:
            return refusal
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
        return _json(
            {"object": "list", "data": data, "has_more": False, "first_id": first, "last_id": last}
        )

    async def _props(self, request: web.Request) -> web.StreamResponse:
        await self._record(request, "props", None)
        if self.n_ctx is None:
            return web.json_response({"error": "not found"}, status=404)
        return _json({"default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": 1})

    async def _stream(
        self, request: web.Request, frames: list[bytes], turn: Turn
    ) -> web.StreamResponse:
        """Send SSE frames, paced by `turn.event_delay_s`; stall where `turn` says to."""
        response = await _open_sse(request)
        for index, frame in enumerate(frames):
            if index == turn.stall_after_events:
                await self._closing.wait()  # silent until the fake stops; the client gives up
                return response
            if turn.event_delay_s:
                await asyncio.sleep(turn.event_delay_s)
            try:
                await response.write(frame)
            except ConnectionResetError:  # the client gave up mid-stream
                return response
        await response.write_eof()
        return response

    # --- decisions -------------------------------------------------------------------------

    async def _admit(
        self, request: web.Request, api: str
    ) -> tuple[dict[str, Any], web.StreamResponse | None]:
        """Record the request, then check its key; returns the JSON body or a 401."""
        body: dict[str, Any] = {}
        if request.method == "POST":
            body = await request.json()
        await self._record(request, api, body if request.method == "POST" else None)
        if self.expected_key is not None and _auth_key(request) != self.expected_key:
            wire = "openai" if api in ("openai", "models") else "anthropic"
            return body, _error(wire, 401, "authentication_error", "invalid x-api-key")
        return body, None

    async def _record(self, request: web.Request, api: str, body: dict[str, Any] | None) -> None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        kept = body if self.record_bodies else None
        async with self._changed:
            self.requests.append(
                RecordedRequest(api=api, path=request.path, headers=headers, json=kept)
            )
            self._changed.notify_all()

    async def _next_turn(self, body: dict[str, Any], api: str) -> Turn:
        turn = self.responder(body, api) if self.responder else None
        if turn is None and self._state.script:
            turn = self._state.script.popleft()
        if turn is None:
            turn = Turn(text=f"echo: {_last_user_text(body)}")
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
        stop = turn.stop or ("tool_use" if calls else "end")
        return ReplyParts(text=turn.text, tool_calls=calls, stop=stop)

    def _anthropic_usage(self, body: dict[str, Any], key: str, reply: ReplyParts) -> dict[str, Any]:
        blocks = anthropic_prompt_blocks(body)
        digests = prefix_digests(blocks, canonical_json([body["model"], key]))
        now = self.clock()
        cache = self._state.anthropic_cache

        def is_live(index: int) -> bool:
            entry = cache.get(digests[index])
            return entry is not None and entry.expires_at > now

        plan = plan_anthropic_cache(blocks, is_live, min_cache_tokens=self.min_cache_tokens)
        if plan.hit_index is not None:
            hit = cache[digests[plan.hit_index]]
            hit.expires_at = now + TTL_SECONDS[hit.ttl]
        cumulative = itertools.accumulate(b.tokens for b in blocks)
        totals = list(cumulative)
        for index, ttl in plan.store:
            cache[digests[index]] = _CacheEntry(totals[index], ttl, now + TTL_SECONDS[ttl])
        written = plan.write_tokens_by_ttl
        return {
            "input_tokens": plan.input_tokens,
            "output_tokens": _output_tokens(reply),
            "cache_creation_input_tokens": sum(written.values()),
            "cache_read_input_tokens": plan.read_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written.get("5m", 0),
                "ephemeral_1h_input_tokens": written.get("1h", 0),
            },
            "service_tier": "standard",
        }

    def _openai_usage(self, body: dict[str, Any], key: str, reply: ReplyParts) -> dict[str, Any]:
        blocks = openai_prompt_blocks(body)
        digests = prefix_digests(blocks, canonical_json([body["model"], key]))
        seen = self._state.openai_prefixes
        cached, running = 0, 0
        for block, digest in zip(blocks, digests, strict=True):
            running += block.tokens
            if digest in seen:
                cached = running
        seen.update(digests)
        prompt = sum(b.tokens for b in blocks)
        completion = _output_tokens(reply)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }


def _auth_key(request: web.Request) -> str:
    """The key from `x-api-key` or `Authorization: Bearer` (SDK versions differ)."""
    key = request.headers.get("x-api-key")
    if key:
        return key
    auth = request.headers.get("Authorization", "")
    return auth[7:] if auth.lower().startswith("bearer ") else ""


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or ()):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or () if b.get("type") == "text"]
        if texts:
            return "".join(texts)
    return ""


def _output_tokens(reply: ReplyParts) -> int:
    args = "".join(a for _, _, a in reply.tool_calls)
    return max(tokens_of_text(reply.text + args), 1)


def _error(
    wire: str, status: int, error_type: str, message: str, *, retry_after_ms: int | None = None
) -> web.Response:
    if wire == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
    else:
        code = "invalid_api_key" if status == 401 else None
        body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    headers = {}
    if retry_after_ms is not None and (status == 429 or status >= 500):
        headers = {
            "retry-after-ms": str(retry_after_ms),
            "retry-after": str(-(-retry_after_ms // 1000)),
        }
    return _json(body, headers, status=status)


def _json(
    body: dict[str, Any], headers: dict[str, str] | None = None, *, status: int = 200
) -> web.Response:
    return web.Response(
        text=json.dumps(body), status=status, content_type="application/json", headers=headers or {}
    )


async def _open_sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    return response
