"""`POST /v1/chat/completions`, streaming or not: one turn of the runner per request.

The assistant keeps the history, so only the newest user message of the request is used.
`X-Hermes-Session-Id` continues a session (every response carries it); without it, the body's
`user` field maps to one session per user, and a request with neither starts a new session.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from agent.errors import HermesError
from gateway.http.errors import api_error
from gateway.platforms.base import ChatRef, InboundMessage

if TYPE_CHECKING:
    from gateway.run import GatewayRunner, TurnOutcome

__all__ = ["CREDENTIAL", "SESSION_HEADER", "ChatCompletions", "last_user_text"]

log = structlog.get_logger(__name__)

SESSION_HEADER = "X-Hermes-Session-Id"
CREDENTIAL = web.RequestKey("credential", str)
"""The name of the API key that authenticated the request (set by the server's auth)."""


class _ChatBody(BaseModel):
    """The subset of a Chat Completions request we read; other fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    messages: list[dict[str, Any]]
    model: str | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    user: str | None = None


def last_user_text(messages: list[dict[str, Any]]) -> str | None:
    """The text of the newest user message (string or text-block content), or None."""
    for msg in reversed(messages):
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [b.get("text", "") for b in content if isinstance(b, dict)]
            return "".join(t for t in texts if isinstance(t, str))
        return None
    return None


class ChatCompletions:
    """The Chat Completions route, over the runner."""

    def __init__(self, runner: GatewayRunner) -> None:
        self._runner = runner

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = _ChatBody.model_validate(await request.json())
        except (ValidationError, json.JSONDecodeError, ValueError) as exc:
            return api_error(
                400, f"invalid request body: {str(exc)[:300]}", "invalid_request_error"
            )
        text = last_user_text(body.messages)
        if not text:
            return api_error(
                400, "messages must contain a user message with text", "invalid_request_error"
            )
        session_id = request.headers.get(SESSION_HEADER) or None
        if session_id and not await self._runner.has_session(session_id):
            return api_error(404, f"no session {session_id!r}", "not_found_error")
        user = body.user or (f"anon-{uuid.uuid4().hex}" if session_id is None else "api")
        inbound = InboundMessage(
            chat=ChatRef(platform="http", chat_id=user),
            user_id=user,
            text=text,
            is_direct=True,
            credential=request[CREDENTIAL],
        )
        model = body.model or self._runner.config.model.default
        try:
            if body.stream:
                return await self._stream(request, inbound, session_id, model, body)
            outcome = await asyncio.shield(
                self._runner.submit(inbound, _CollectSink(), session_id=session_id)
            )
        except HermesError as exc:  # the runner is shutting down
            return api_error(503, str(exc), "service_unavailable")
        if outcome.busy:  # another worker kept the session busy past the lock's bound
            return api_error(503, outcome.reply, "service_unavailable")
        return web.json_response(
            _completion(outcome, model), headers={SESSION_HEADER: outcome.session_id}
        )

    async def _stream(
        self,
        request: web.Request,
        inbound: InboundMessage,
        session_id: str | None,
        model: str,
        body: _ChatBody,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        sink = _SseSink(response, completion_id, model)
        future = self._runner.submit(inbound, sink, session_id=session_id)
        # The session id is known only once routed; send headers at the first delta or the end.
        sink.prepare = lambda: response.prepare(request)
        outcome = await asyncio.shield(future)
        if not response.prepared:
            response.headers[SESSION_HEADER] = outcome.session_id
            await response.prepare(request)
        await sink.write_chunk({"role": "assistant"} if not sink.sent_any else {}, finish="stop")
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        if include_usage and outcome.usage is not None:
            await sink.write_raw({**sink.envelope(), "choices": [], "usage": _usage(outcome)})
        if not sink.is_gone:
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        return response


class _CollectSink:
    """Non-streaming: the runner's reply text is returned whole by the future."""

    streams = False

    async def start(self, session_id: str) -> None: ...
    async def on_text(self, delta: str) -> None: ...
    async def notice(self, text: str) -> None: ...
    async def finish(self, text: str) -> None: ...


class _SseSink:
    """Streams deltas as `chat.completion.chunk` server-sent events."""

    streams = True

    def __init__(self, response: web.StreamResponse, completion_id: str, model: str) -> None:
        self._response = response
        self._id = completion_id
        self._model = model
        self.sent_any = False
        self.is_gone = False
        """The client went away; the turn still finishes and is saved, we just stop writing."""
        self.prepare: Any = None

    def envelope(self) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self._model,
        }

    async def write_raw(self, payload: dict[str, Any]) -> None:
        if self.is_gone:
            return
        data = f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()
        try:
            if not self._response.prepared and self.prepare is not None:
                await self.prepare()
            await self._response.write(data)
        except ConnectionResetError:
            self.is_gone = True
            log.info("http_client_went_away")

    async def write_chunk(self, delta: dict[str, Any], *, finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        await self.write_raw({**self.envelope(), "choices": [choice]})

    async def start(self, session_id: str) -> None:
        self._response.headers[SESSION_HEADER] = session_id

    async def notice(self, text: str) -> None: ...

    async def finish(self, text: str) -> None:
        if not self.sent_any and text:  # commands and errors arrive whole
            await self.on_text(text)

    async def on_text(self, delta: str) -> None:
        first = not self.sent_any
        self.sent_any = True
        await self.write_chunk(
            {"role": "assistant", "content": delta} if first else {"content": delta}
        )


def _usage(outcome: TurnOutcome) -> dict[str, Any]:
    usage = outcome.usage
    if usage is None:
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.prompt_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
    }


def _completion(outcome: TurnOutcome, model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": outcome.reply},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(outcome),
    }
