"""FakeResponses: the OpenAI Responses API (and the Codex backend path) on 127.0.0.1.

Scripted turns (`fake.script(ResponsesTurn(...))`) or an echo of the last user text; JSON or
SSE (`stream: true`). It emulates server-side compaction: with `context_management` and an
input over `compact_threshold` tokens (ceil(chars / 4)) it emits an encrypted compaction item
first. Encrypted items are bound to the Host that issued them and refused anywhere else, like
the real issuer check. `http_client_for(url)` gives the SDK a client whose requests keep their
real Host (api.openai.com, chatgpt.com) but are delivered here, so route gates see real URLs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

import httpx2
from aiohttp import web

__all__ = ["FakeResponses", "FunctionCallSpec", "RecordedCall", "ResponsesTurn"]

OPAQUE_ITEM_TOKENS = 50
"""What a replayed compaction or reasoning item counts as in the fake's input tokens."""
_ITEM_TYPES = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "compaction"}
)
_ROLES = frozenset({"user", "assistant", "developer", "system"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCallSpec:
    """A function call the fake model makes."""

    name: str
    arguments: str = "{}"
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesTurn:
    """One scripted reply: text, calls, opaque items, or an HTTP error."""

    text: str = ""
    tool_calls: Sequence[FunctionCallSpec] = ()
    reasoning: bool = False
    """Emit a reasoning item with encrypted content before the message."""
    compaction: bool = False
    """Emit a compaction item even when the threshold was not crossed."""
    error: tuple[int, str, str] | None = None
    """(HTTP status, error type, message)."""
    error_param: str | None = None
    error_code: str | None = None
    delay_s: float = 0.0
    stall_after_events: int | None = None
    """Streamed replies only: send this many SSE events, then go silent with the socket open."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedCall:
    """One request as received: path, the Host it was addressed to, headers, JSON body."""

    path: str
    host: str
    headers: dict[str, str]
    json: dict[str, Any]


@dataclass(slots=True)
class _Issued:
    """Encrypted contents handed out, per issuing host."""

    by_host: dict[str, set[str]] = field(default_factory=dict)
    prefixes: dict[str, set[str]] = field(default_factory=dict)


class FakeResponses:
    """`async with FakeResponses() as fake`; base URLs: `fake.openai_base_url`, `fake.codex_base_url`."""

    def __init__(self, *, reject_context_management: bool = False) -> None:
        self.reject_context_management = reject_context_management
        """Answer any request carrying `context_management` with a structured 400."""
        self.requests: list[RecordedCall] = []
        self._script: deque[ResponsesTurn] = deque()
        self._issued = _Issued()
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
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def codex_base_url(self) -> str:
        return self.url + "/backend-api/codex"

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post(
            "/{prefix:.*}/responses", self._responses
        )  # /v1, /backend-api/codex, relays
        self._runner = web.AppRunner(app, shutdown_timeout=0.1, handle_signals=False)
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

    def script(self, *turns: ResponsesTurn) -> None:
        self._script.extend(turns)

    def assert_complete(self) -> None:
        assert not self._script, f"{len(self._script)} scripted turn(s) never requested"

    def http_client_for(self, url: str) -> httpx2.AsyncClient:
        """A client for the SDK: requests to `url`'s host arrive here with their Host intact."""
        expected = (urlsplit(url).hostname or "").lower()
        return httpx2.AsyncClient(transport=_Redirect(self.port, expected))

    async def wait_requests(self, n: int, timeout: float = 5.0) -> list[RecordedCall]:  # noqa: ASYNC109
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.requests) >= n)
        return list(self.requests)

    # --- handler ---------------------------------------------------------------------------

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        host = request.headers.get("Host", "").lower()
        call = RecordedCall(path=request.path, host=host, headers=dict(request.headers), json=body)
        async with self._changed:
            self.requests.append(call)
            self._changed.notify_all()
        if not request.headers.get("Authorization", "").startswith("Bearer "):
            return _error(401, "invalid_request_error", "missing bearer token")
        problem = _validate(body) or self._foreign_item(body, host)
        if problem:
            return _error(400, "invalid_request_error", problem[1], code=problem[0])
        if self.reject_context_management and "context_management" in body:
            return _error(
                400,
                "invalid_request_error",
                "Unsupported parameter: 'context_management' is not supported with this model.",
                param="context_management",
                code="unsupported_parameter",
            )
        turn = self._script.popleft() if self._script else ResponsesTurn(text=_echo(body))
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        if turn.error is not None:
            status, kind, message = turn.error
            return _error(status, kind, message, param=turn.error_param, code=turn.error_code)
        response = self._build(body, host, turn)
        if body.get("stream"):
            stall = turn.stall_after_events
            return await _send_sse(request, response, stall, self._closing)
        return web.json_response(response)

    def _foreign_item(self, body: dict[str, Any], host: str) -> tuple[str, str] | None:
        issued = self._issued.by_host.get(host, set())
        for item in body.get("input") or ():
            blob = item.get("encrypted_content") if isinstance(item, dict) else None
            if blob is not None and blob not in issued:
                return ("invalid_encrypted_content", f"encrypted content was not issued by {host}")
        return None

    def _build(self, body: dict[str, Any], host: str, turn: ResponsesTurn) -> dict[str, Any]:
        input_tokens, cached = self._count_input(body, host)
        output: list[dict[str, Any]] = []
        if turn.compaction or _crosses_threshold(body, input_tokens):
            output.append(self._opaque("compaction", host))
        if turn.reasoning:
            output.append(self._opaque("reasoning", host))
        if turn.text:
            output.append(_message_item(f"msg_{next(self._ids):04d}", turn.text))
        for spec in turn.tool_calls:
            call_id = spec.call_id or f"call_{next(self._ids):04d}"
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{call_id}",
                    "call_id": call_id,
                    "name": spec.name,
                    "arguments": spec.arguments,
                    "status": "completed",
                }
            )
        output_tokens = _tokens(turn.text) + sum(_tokens(s.arguments) for s in turn.tool_calls)
        return {
            "id": f"resp_{next(self._ids):04d}",
            "object": "response",
            "created_at": time.time(),
            "model": body["model"],
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "store": False,
            "error": None,
            "incomplete_details": None,
            "usage": {
                "input_tokens": input_tokens,
                "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                "output_tokens": output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input_tokens + output_tokens,
            },
        }

    def _opaque(self, kind: str, host: str) -> dict[str, Any]:
        n = next(self._ids)
        blob = f"enc-{kind}-{host}-{n}"
        self._issued.by_host.setdefault(host, set()).add(blob)
        item: dict[str, Any] = {
            "type": kind,
            "id": f"{kind[:3]}_{n:04d}",
            "encrypted_content": blob,
        }
        if kind == "reasoning":
            item["summary"] = []
        return item

    def _count_input(self, body: dict[str, Any], host: str) -> tuple[int, int]:
        """(input tokens, cached tokens): cached = the longest item prefix seen before."""
        blocks = [_tokens(body.get("instructions") or "")]
        blocks += [_item_tokens(item) for item in body.get("input") or ()]
        seen = self._issued.prefixes.setdefault(host, set())
        keys = [json.dumps(body.get("instructions"))]
        keys += [json.dumps(i, sort_keys=True) for i in body.get("input") or ()]
        cached, running, prefix = 0, 0, ""
        for key, tokens in zip(keys, blocks, strict=True):
            prefix += key
            running += tokens
            if prefix in seen:
                cached = running
            seen.add(prefix)
        return sum(blocks), cached


class _Redirect(httpx2.AsyncBaseTransport):
    """Delivers requests for one public host to the fake on loopback; anything else fails."""

    def __init__(self, port: int, expected_host: str) -> None:
        self._port = port
        self._expected = expected_host
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.host != self._expected:
            raise httpx2.ConnectError(f"fake transport only serves {self._expected}")
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self._port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _validate(body: dict[str, Any]) -> tuple[str, str] | None:
    """Our contract (store=False, client-side replay) plus the item shapes the API requires."""
    if body.get("store") is not False:
        return ("invalid_store", "fake: requests must set store=false")
    if "previous_response_id" in body:
        return ("invalid_previous_response", "fake: previous_response_id must not be sent")
    items = body.get("input")
    if not isinstance(items, list):
        return ("invalid_input", "input must be a list of items")
    calls: set[str] = set()
    after_compaction = False
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind not in _ITEM_TYPES:
            return ("invalid_input", f"input[{index}]: unknown item type {kind!r}")
        if kind == "compaction":
            after_compaction = True
        elif kind == "message" and item.get("role") not in _ROLES:
            return ("invalid_input", f"input[{index}]: bad role {item.get('role')!r}")
        elif kind == "function_call":
            if not (
                item.get("call_id") and item.get("name") and isinstance(item.get("arguments"), str)
            ):
                return (
                    "invalid_input",
                    f"input[{index}]: function_call needs call_id, name, arguments",
                )
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in calls and not after_compaction:
                return (
                    "invalid_input",
                    f"input[{index}]: no function_call for {item.get('call_id')!r}",
                )
    return None


def _crosses_threshold(body: dict[str, Any], input_tokens: int) -> bool:
    for entry in body.get("context_management") or ():
        threshold = entry.get("compact_threshold")
        if entry.get("type") == "compaction" and threshold is not None and input_tokens > threshold:
            return True
    return False


def _echo(body: dict[str, Any]) -> str:
    for item in reversed(body.get("input") or []):
        if item.get("type") == "message" and item.get("role") == "user":
            return "echo: " + _item_text(item)
    return "echo"


def _item_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text") or "") for p in content or () if isinstance(p, dict))


def _item_tokens(item: dict[str, Any]) -> int:
    kind = item.get("type")
    if kind in ("compaction", "reasoning"):
        return OPAQUE_ITEM_TOKENS
    if kind == "message":
        return _tokens(_item_text(item))
    if kind == "function_call":
        return _tokens(item.get("name", "") + item.get("arguments", ""))
    return _tokens(str(item.get("output") or ""))


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _message_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _error(
    status: int, kind: str, message: str, *, param: str | None = None, code: str | None = None
) -> web.Response:
    headers = {"retry-after-ms": "10"} if status == 429 or status >= 500 else {}
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.json_response(body, status=status, headers=headers)


def _events(response: dict[str, Any]) -> list[dict[str, Any]]:
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for piece in _split(text):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _split(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words) if w or i == 0]


async def _send_sse(
    request: web.Request, response: dict[str, Any], stall: int | None, closing: asyncio.Event
) -> web.StreamResponse:
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await stream.prepare(request)
    for index, event in enumerate(_events(response)):
        if index == stall:
            await closing.wait()  # silent until the fake stops; the client gives up
            return stream
        payload = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
        await stream.write(payload.encode())
    await stream.write_eof()
    return stream
