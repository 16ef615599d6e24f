"""`POST /v1/chat/completions`, streaming or not: one turn of the runner per request.

OpenAI API reference, "Create chat completion" (request body, `chat.completion` object) and
"Streaming" (`chat.completion.chunk` events, `data: [DONE]`). The body is read and checked by
`gateway.http.client_request` (every refusal a 400 naming it). Which session a request runs on,
and which of its messages are the turn, is `gateway.http.conversations`:

- session mode (`X-Hermes-Session-Id`, or `user` with `gateway.http.user_sessions`): the store
  keeps the history (a session id the key does not own is a 404, exactly as an unknown one);
  the turn is the request's newest user message, or the `role: tool` results it ends with
  (client tools: `gateway.http.tool_proxy`);
- stateless mode (neither): the request's `messages` are the conversation, recognised by their
  prefix when they extend one stored before, so the model gets its (possibly compacted) active
  set plus the new messages; an unrecognised history starts a session that imports it.

Every response carries the session id in `X-Hermes-Session-Id`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from agent.errors import HermesError, MessageTooLong, TurnRefused
from agent.messages import ToolCall
from gateway.http.client_request import ChatRequest, parse_chat_request
from gateway.http.conversations import Conversation, Conversations
from gateway.http.error_envelope import ApiError, api_error
from gateway.http.failure_responses import error_for, outcome_error
from gateway.http.guards import checked_user, read_json
from gateway.http.image_parts import has_images, take_images
from gateway.http.tool_proxy import (
    checked_options,
    refusal_of,
    tool_call_deltas,
    tool_calls_json,
)
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.principals import DEFAULT_HTTP_KEY
from gateway.reply import WholeReplySink
from state import person_owner

if TYPE_CHECKING:
    from agent.turn_options import TurnOptions
    from gateway.http.model_routes import ModelRoutes
    from gateway.reply import ReplySink
    from gateway.run import GatewayRunner, TurnOutcome

__all__ = [
    "CREDENTIAL",
    "SESSION_HEADER",
    "ChatCompletions",
    "client_view",
    "owner_of",
    "session_not_found",
]

log = structlog.get_logger(__name__)

SESSION_HEADER = "X-Hermes-Session-Id"
CREDENTIAL = web.RequestKey("credential", str)
"""The name of the API key that authenticated the request (set by the server's auth)."""


def owner_of(request: web.Request) -> str:
    """The owner key of the API key that authenticated `request` (`http:<key name>`, as
    `gateway.principals` names its principal): what it creates is this key's, and only this."""
    return person_owner("http", request.get(CREDENTIAL) or DEFAULT_HTTP_KEY)


def session_not_found(session_id: str) -> ApiError:
    """The answer to a session id the key may not use, whether unknown or another key's: one
    404, word for word the same, so a key cannot even learn that the session exists."""
    return ApiError(
        404,
        f"No session {session_id!r} for this API key; omit {SESSION_HEADER} to start one.",
        param=SESSION_HEADER,
        code="session_not_found",
    )


class ChatCompletions:
    """The Chat Completions route, over the runner."""

    def __init__(self, runner: GatewayRunner, models: ModelRoutes) -> None:
        self._runner = runner
        self._models = models
        config = runner.config
        self.conversations = Conversations(
            runner.store.sessions,
            runner.store.transcript,
            system_prompt=config.agent.system_prompt,
            model=config.model.default,
            max_chars=config.gateway.max_message_chars,
            context_length=runner.default_context_length,
        )

    async def conversation(
        self, request: web.Request, body: ChatRequest, user: str | None
    ) -> Conversation:
        """The request's mode, session and turn (raises ApiError for a request it cannot run)."""
        session_id = request.headers.get(SESSION_HEADER) or None
        owner = owner_of(request)
        if session_id is not None:
            if not await self._runner.owns_session(owner, session_id):
                raise session_not_found(session_id)  # another key's session: as if unknown
            return await self.conversations.in_session(body.messages, session_id)
        if user and self._runner.config.gateway.http.user_sessions:
            return await self.conversations.in_session(body.messages, None)
        try:
            return await self.conversations.stateless(body.messages, user_id=user, owner=owner)
        except MessageTooLong as exc:  # refused before any session exists, as the runner would
            raise error_for(exc) from None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            raw = await read_json(request)
        except ApiError as exc:
            return exc.response()
        try:
            body = parse_chat_request(raw)
            options = checked_options(body, self._models.wire(body.model))
            if has_images(body.messages):  # type: ignore[arg-type]
                body = await self._with_images(request, body)
        except ApiError as exc:
            return exc.response()
        options = self._models.route(options, body.model)
        user = checked_user(body.user)
        conversation = await asyncio.shield(self.conversation(request, body, user))
        inbound = InboundMessage(
            chat=ChatRef(platform="http", chat_id=user or "api"),
            user_id=user or "api",
            text=conversation.text,
            is_direct=True,
            credential=request[CREDENTIAL],
        )
        model = body.model or self._runner.config.model.default
        try:
            if body.stream:
                return await self._stream(request, inbound, conversation, options, model, body)
            turn = self._turn(inbound, WholeReplySink(), conversation, options)
            outcome = await asyncio.shield(turn)
        except HermesError as exc:  # the runner is shutting down
            return api_error(
                503, str(exc), "service_unavailable", code="draining", headers={"Retry-After": "5"}
            )
        if isinstance(outcome.error, TurnRefused):
            said = len(conversation.turn)
            return refusal_of(outcome.error, len(body.messages), said).response()
        if (refusal := outcome_error(outcome)) is not None:
            raise refusal
        return web.json_response(
            _completion(outcome, outcome.model or model),
            headers={SESSION_HEADER: outcome.session_id},
        )

    async def _with_images(self, request: web.Request, body: ChatRequest) -> ChatRequest:
        """The request with its images stored for the caller and referenced, not carried."""
        runner = self._runner
        intake = runner.media_intake
        taken = await take_images(
            body.messages,  # type: ignore[arg-type]
            media=intake.media if intake is not None else None,
            owner=owner_of(request),
            fetch_timeout_s=runner.config.media.fetch_timeout_s,
        )
        return dataclasses.replace(body, messages=tuple(taken))  # type: ignore[arg-type]

    async def _turn(
        self,
        inbound: InboundMessage,
        sink: ReplySink,
        conversation: Conversation,
        options: TurnOptions,
    ) -> TurnOutcome:
        """Run the turn, then record a stateless conversation's new head before the client
        hears the end of the reply (its next request may come at once)."""
        outcome = await self._runner.submit(
            inbound,
            sink,
            session_id=conversation.session_id,
            options=options,
            said=conversation.turn,
        )
        if isinstance(outcome.error, MessageTooLong | TurnRefused):  # nothing was stored
            await self.conversations.give_back(conversation)
        else:
            await self.conversations.settle(conversation, outcome.session_id, client_view(outcome))
        return outcome

    async def _stream(
        self,
        request: web.Request,
        inbound: InboundMessage,
        conversation: Conversation,
        options: TurnOptions,
        model: str,
        body: ChatRequest,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        sink = _SseSink(response, completion_id, model)
        turn = asyncio.ensure_future(self._turn(inbound, sink, conversation, options))
        # The session id is known only once routed; send headers at the first delta or the end.
        sink.prepare = lambda: response.prepare(request)
        outcome = await asyncio.shield(turn)
        if isinstance(outcome.error, TurnRefused) and not response.prepared:
            said = len(conversation.turn)
            return refusal_of(outcome.error, len(body.messages), said).response()
        if (refusal := outcome_error(outcome)) is not None:
            if not response.prepared:
                raise refusal  # nothing sent yet: a proper status
            await sink.write_raw(refusal.body())  # mid-stream: an error event, then the end
            return await _end_stream(response, sink)
        if not response.prepared:
            response.headers[SESSION_HEADER] = outcome.session_id
            await response.prepare(request)
        if not sink.sent_any and sink.final:  # commands arrive whole
            await sink.on_text(sink.final)
        calls = _tool_calls(outcome)
        for delta in tool_call_deltas(calls, first=not sink.sent_any):
            await sink.write_chunk(delta)
            sink.sent_any = True
        finish = _finish_reason(outcome)
        await sink.write_chunk({"role": "assistant"} if not sink.sent_any else {}, finish=finish)
        if body.include_usage and outcome.usage is not None:
            await sink.write_raw({**sink.envelope(), "choices": [], "usage": _usage(outcome)})
        return await _end_stream(response, sink)


async def _end_stream(response: web.StreamResponse, sink: _SseSink) -> web.StreamResponse:
    if not sink.is_gone:
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    return response


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
        self.final = ""
        """The turn's whole reply; written only once the outcome says it is no failure."""

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
        self.final = text

    async def on_text(self, delta: str) -> None:
        first = not self.sent_any
        self.sent_any = True
        await self.write_chunk(
            {"role": "assistant", "content": delta} if first else {"content": delta}
        )


def _tool_calls(outcome: TurnOutcome) -> tuple[ToolCall, ...]:
    return outcome.turn.tool_calls if outcome.turn is not None else ()


def _finish_reason(outcome: TurnOutcome) -> str:
    """tool_calls (the client's tools were called), length (the reply hit max_tokens), stop."""
    if _tool_calls(outcome):
        return "tool_calls"
    return "length" if outcome.turn is not None and outcome.turn.truncated else "stop"


def client_view(outcome: TurnOutcome) -> dict[str, Any] | None:
    """The assistant message as the client receives it (and will send back in its next
    request's history, which is how a stateless conversation is recognised), or None when the
    turn did not answer."""
    if outcome.kind != "reply":
        return None
    calls = _tool_calls(outcome)
    if calls:
        return {"role": "assistant", "content": outcome.reply or None, "tool_calls": list(calls)}
    return {"role": "assistant", "content": outcome.reply}


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
    calls = _tool_calls(outcome)
    message: dict[str, Any] = {"role": "assistant", "content": outcome.reply}
    if calls:
        message = {
            **message,
            "content": outcome.reply or None,
            "tool_calls": tool_calls_json(calls),
        }
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish_reason(outcome),
                "logprobs": None,
            }
        ],
        "usage": _usage(outcome),
    }
