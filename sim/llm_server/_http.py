"""HTTP plumbing shared by the fake's wires: keys, bodies, error envelopes, JSON and SSE replies.

The refusals model the real services (cited per function), so a client that gets by here is
not relying on the fake being lenient:
- Anthropic: https://docs.anthropic.com/en/api/errors (envelope `{"type": "error", "error":
  {"type", "message"}, "request_id"}`, `invalid_request_error` for 400, `authentication_error`
  for 401) and https://docs.anthropic.com/en/api/versioning (`anthropic-version` is required).
- OpenAI: https://platform.openai.com/docs/guides/error-codes (envelope `{"error": {"message",
  "type", "param", "code"}}`; 401 "Incorrect API key provided" / code `invalid_api_key`) and
  https://platform.openai.com/docs/api-reference/authentication (`Authorization: Bearer`).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiohttp import web

from sim.llm_server._values import ErrorReply, Family

__all__ = [
    "body_refusal",
    "error_response",
    "fragments",
    "header_refusal",
    "invalid_request",
    "json_response",
    "key_refusal",
    "missing_parameter",
    "presented_key",
    "read_json",
    "request_id_headers",
    "send_sse",
    "split_deltas",
    "sse_frame",
]

_UNPARSED = object()
"""What `read_json` returns for a body that is not JSON at all."""
_TOO_LARGE = object()
"""What `read_json` returns for a body over the server's `client_max_size`."""
_OPENAI_KEYS_URL = "https://platform.openai.com/account/api-keys"


def invalid_request(
    message: str, *, param: str | None = None, code: str | None = None
) -> ErrorReply:
    """A 400 `invalid_request_error`, the type both families give a body they refuse."""
    return ErrorReply(
        status=400, type="invalid_request_error", message=message, param=param, code=code
    )


def missing_parameter(param: str) -> ErrorReply:
    """OpenAI's 400 for a required field that is absent (or not of the type it must be)."""
    return invalid_request(
        f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter"
    )


def presented_key(request: web.Request, family: Family) -> str:
    """The API key sent: `Authorization: Bearer` always; `x-api-key` too on Anthropic's API.

    anthropic 2.14 sends `Authorization: Bearer`, older SDKs `x-api-key`; OpenAI only reads the
    bearer token, so an `x-api-key` there counts as no key.
    """
    if family == "anthropic" and request.headers.get("x-api-key"):
        return request.headers["x-api-key"]
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else ""


def key_refusal(
    family: Family, presented: str, expected: str | None, *, required: bool
) -> ErrorReply | None:
    """The real 401 for a missing or wrong key; `required=False` lets a keyless request in."""
    if expected is None and (presented or not required):
        return None
    if presented == expected:
        return None
    if family == "anthropic":
        text = "invalid x-api-key" if presented else "x-api-key header is required"
        return ErrorReply(status=401, type="authentication_error", message=text)
    if not presented:
        text = (
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). "
            f"You can obtain an API key from {_OPENAI_KEYS_URL}."
        )
        return ErrorReply(status=401, type="invalid_request_error", message=text)
    text = f"Incorrect API key provided: {_masked(presented)}. You can find your API key at "
    return ErrorReply(
        status=401,
        type="invalid_request_error",
        message=text + f"{_OPENAI_KEYS_URL}.",
        code="invalid_api_key",
    )


def header_refusal(family: Family, headers: Mapping[str, str]) -> ErrorReply | None:
    """Anthropic answers 400 to a request without `anthropic-version`; OpenAI needs nothing."""
    if family == "anthropic" and not headers.get("anthropic-version"):
        return invalid_request("anthropic-version: header is required")
    return None


async def read_json(request: web.Request) -> Any:
    """The decoded body; `_UNPARSED` when it is not JSON (empty, truncated, not UTF-8)."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _TOO_LARGE
    try:
        return json.loads(raw)
    except ValueError:
        return _UNPARSED


def body_refusal(family: Family, value: Any) -> ErrorReply | None:
    """The real 400 for a body that is not JSON or not an object; 413 for one that is too large."""
    if isinstance(value, dict):
        return None
    if value is _TOO_LARGE:
        kind = "request_too_large" if family == "anthropic" else "invalid_request_error"
        text = "Request exceeds the maximum allowed number of bytes."
        return ErrorReply(status=413, type=kind, message=text)
    if family == "anthropic":
        what = "the body is not valid JSON" if value is _UNPARSED else "the body must be an object"
        text = f"There was an issue with the format or content of your request: {what}"
        return invalid_request(text)
    if value is _UNPARSED:
        text = (
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.)"
        )
        return invalid_request(text)
    return invalid_request(f"{json.dumps(value)[:40]} is not of type 'object'")


def request_id_headers(family: Family, request_id: str) -> dict[str, str]:
    """Every reply names its request: `request-id` (Anthropic), `x-request-id` (OpenAI)."""
    return {"request-id" if family == "anthropic" else "x-request-id": request_id}


def error_response(family: Family, error: ErrorReply, request_id: str) -> web.Response:
    """`error` in the family's envelope, with retry hints on 429 and 5xx."""
    headers = request_id_headers(family, request_id)
    if family == "anthropic":
        detail = {"type": error.type, "message": error.message}
        body: dict[str, Any] = {"type": "error", "error": detail, "request_id": request_id}
    else:
        detail = {"message": error.message, "type": error.type}
        body = {"error": {**detail, "param": error.param, "code": error.code}}
    ms = error.retry_after_ms
    if ms is not None and (error.status == 429 or error.status >= 500):
        headers["retry-after-ms"] = str(ms)
        headers["retry-after"] = str(-(-ms // 1000))
    return json_response(body, headers, status=error.status)


def json_response(
    body: Any, headers: Mapping[str, str] | None = None, *, status: int = 200
) -> web.Response:
    """A bare `application/json` reply (no charset parameter, as the real APIs send)."""
    return web.Response(
        text=json.dumps(body),
        status=status,
        content_type="application/json",
        headers=dict(headers or {}),
    )


def sse_frame(data: Any, event: str | None = None) -> str:
    """One server-sent event; OpenAI's Chat stream has no `event:` lines, the others do."""
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n"


async def send_sse(
    request: web.Request,
    frames: Iterable[str],
    headers: Mapping[str, str] | None = None,
    *,
    stall_after: int | None = None,
    event_delay_s: float = 0.0,
    closing: asyncio.Event | None = None,
    on_abandoned: Callable[[], None] | None = None,
    release: threading.Event | None = None,
) -> web.StreamResponse:
    """Send the frames, each after `event_delay_s`; after `stall_after` of them go silent with
    the socket open until `closing` is set (the fake stops), as a hung upstream would, or until
    the client closes the connection (`on_abandoned` hears it: the request was cancelled). With
    `release`, the silence ends when it is set, and the rest of the frames follow."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            **(headers or {}),
        }
    )
    await response.prepare(request)
    for index, frame in enumerate(frames):
        if index == stall_after:
            await _stall(request, closing, on_abandoned, release)
            if release is None or not release.is_set():
                return response
        if event_delay_s:
            await asyncio.sleep(event_delay_s)
        try:
            await response.write(frame.encode())
        except ConnectionResetError:  # the client gave up mid-stream
            return response
    await response.write_eof()
    return response


WORD_DELTAS_UP_TO = 1_000
"""A text of up to this many words streams one word per delta, so a test can count events by
words (`stall_after_events`); a longer one streams in `COARSE_DELTAS` runs of words."""
COARSE_DELTAS = 128
"""The real services send about a token a chunk, and a client must accept any split; bounding
the count keeps a 2,400-word echo from costing 2,400 parsed chunks on both ends of the
loopback (a 20-turn test went from 80 s to 22 s)."""


def split_deltas(text: str) -> list[str]:
    """Stream pieces of text: one word with its surrounding whitespace each, or, past
    `WORD_DELTAS_UP_TO` words, `COARSE_DELTAS` runs of consecutive words."""
    words = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    if len(words) <= WORD_DELTAS_UP_TO:
        return words
    per, extra = divmod(len(words), COARSE_DELTAS)
    pieces: list[str] = []
    start = 0
    for index in range(COARSE_DELTAS):
        end = start + per + (1 if index < extra else 0)
        pieces.append("".join(words[start:end]))
        start = end
    return pieces


def fragments(text: str, size: int = 8) -> list[str]:
    """Stream pieces of JSON arguments: fixed-size slices."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def _masked(key: str) -> str:
    """How OpenAI echoes a wrong key: a few leading and the last four characters."""
    if len(key) < 12:
        return "*" * len(key)
    return key[:3] + "*" * (len(key) - 7) + key[-4:]


async def _stall(
    request: web.Request,
    closing: asyncio.Event | None,
    on_abandoned: Callable[[], None] | None,
    release: threading.Event | None = None,
) -> None:
    """Silent until the fake stops, the client hangs up or `release` is set (checked every
    20 ms)."""
    while (closing is None or not closing.is_set()) and not (release and release.is_set()):
        transport = request.transport
        if transport is None or transport.is_closing():
            if on_abandoned is not None:
                on_abandoned()
            return
        await asyncio.sleep(0.02)
