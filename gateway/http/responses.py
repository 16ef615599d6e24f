"""`POST /v1/responses` (OpenAI API reference, "Responses": "Create a model response"), streamed
or not, over the session store.

`input` is a string or a list of message items (`{"role", "content"}`, content a string or
`input_text` / `output_text` parts); `instructions` joins the session's system message when a
conversation starts (after Hermes' own prompt, as in `gateway.http.conversations`). A response
with `store` (default true) can be continued: `previous_response_id` names it, and the session
it was stored in runs the new input as its next turn, so the model gets that session's active set
(compacted when it grew) plus the new input. Only a conversation's newest response continues it;
an older one, one stored with `store: false`, an unknown id, or another API key's response is
one and the same 400 naming `previous_response_id` (OpenAI's `previous_response_not_found`;
forking an older response is not supported). Streaming sends the
Responses event sequence ("Streaming events"): `response.created`, `response.in_progress`,
`response.output_item.added`, `response.content_part.added`, `response.output_text.delta`...,
`response.output_text.done`, `response.content_part.done`, `response.output_item.done`,
`response.completed`, each with its `sequence_number`.
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

from agent.errors import HermesError, MessageTooLong
from agent.messages import ChatMessage, ToolCall, content_text
from agent.turn_options import TurnOptions
from gateway.http.chat import CREDENTIAL, SESSION_HEADER, owner_of
from gateway.http.conversations import Conversations, split_messages, turn_of
from gateway.http.error_envelope import ApiError, api_error
from gateway.http.failure_responses import error_for, outcome_error
from gateway.http.guards import read_json
from gateway.http.image_parts import has_images, take_images
from gateway.http.responses_items import (
    call_options,
    client_tools,
    function_call_item,
    input_messages,
)
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.reply import WholeReplySink

if TYPE_CHECKING:
    from gateway.http.model_routes import ModelRoutes
    from gateway.run import GatewayRunner, TurnOutcome

__all__ = ["Responses", "input_messages"]

log = structlog.get_logger(__name__)

_HEAD_PREFIX = "resp:"
_ARGUMENT_CHUNK_CHARS = 256
"""Streamed arguments go out in pieces of this size, as a model streams them."""


class _ResponsesBody(BaseModel):
    """The fields of a Responses create request we read; others are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    input: str | list[dict[str, Any]]
    model: str | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    store: bool = True
    stream: bool = False
    user: str | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None


class Responses:
    """The Responses route, over the runner and the store's conversation heads."""

    def __init__(
        self, runner: GatewayRunner, conversations: Conversations, models: ModelRoutes
    ) -> None:
        self._runner = runner
        self._conversations = conversations
        self._models = models

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = _ResponsesBody.model_validate(await read_json(request))
        except ApiError as exc:
            return exc.response()
        except (ValidationError, ValueError) as exc:
            first = exc.errors()[0] if isinstance(exc, ValidationError) else None
            field = ".".join(str(p) for p in first["loc"]) if first else None
            message = f"{field}: {first['msg']}" if first else "the body is not JSON"
            return api_error(400, f"invalid request body: {message}", param=field)
        try:
            tools = client_tools(body.tools)
            asked = TurnOptions(call=call_options(body.tool_choice, tools), client_tools=tools)
            options = self._models.route(asked, body.model)  # unknown: 400, no session
            owner = owner_of(request)
            messages = input_messages(body.input)
            if has_images(messages):
                messages = await self._with_images(messages, owner)
            turn_for = self._session_and_turn(body, owner, messages)
            session_id, turn = await asyncio.shield(turn_for)
        except ApiError as exc:
            return exc.response()
        response_id = f"resp_{uuid.uuid4().hex}"
        model = options.model or self._runner.config.model.default
        inbound = InboundMessage(
            chat=ChatRef(platform="http", chat_id=body.user or "api"),
            user_id=body.user or "api",
            text="\n\n".join(content_text(m) for m in turn if m.get("role") == "user"),
            is_direct=True,
            credential=request[CREDENTIAL],
        )
        shell = _Shell(response_id, model, body)
        try:
            if body.stream:
                return await self._stream(request, inbound, session_id, turn, shell, options)
            turn_done = self._turn(inbound, WholeReplySink(), session_id, turn, shell, options)
            outcome = await asyncio.shield(turn_done)
        except HermesError as exc:  # the runner is shutting down
            return api_error(
                503, str(exc), "service_unavailable", code="draining", headers={"Retry-After": "5"}
            )
        finally:
            await self._drop_scratch(session_id, shell)
        if (refusal := outcome_error(outcome)) is not None:  # never a 200 carrying a failure
            return refusal.response()
        shell.model = outcome.model or model
        headers = {SESSION_HEADER: outcome.session_id} if body.store else {}
        return web.json_response(shell.completed(outcome), headers=headers)

    async def _with_images(
        self, messages: list[dict[str, Any]], owner: str
    ) -> list[dict[str, Any]]:
        """`input_image` parts stored for the caller (`owner`) and referenced, not carried."""
        runner = self._runner
        intake = runner.media_intake
        return await take_images(
            messages,
            media=intake.media if intake is not None else None,
            owner=owner,
            fetch_timeout_s=runner.config.media.fetch_timeout_s,
            where="input",
        )

    async def _session_and_turn(
        self, body: _ResponsesBody, owner: str, messages: list[dict[str, Any]]
    ) -> tuple[str, tuple[ChatMessage, ...]]:
        """The session to run on (continued, if `owner`'s, or new) and the turn's messages."""
        if body.instructions and body.previous_response_id is None:
            messages.insert(0, {"role": "system", "content": body.instructions})
        split = split_messages(messages)
        turn = turn_of(split)
        try:
            self._conversations.admit(turn)
        except MessageTooLong as exc:  # refused before any session exists or head is taken
            raise error_for(exc) from None
        if body.previous_response_id is not None:
            head = _HEAD_PREFIX + body.previous_response_id
            found = await self._conversations.take(head, owner=owner)  # another key's: unknown
            if found is None:
                raise ApiError(
                    400,
                    f"Previous response with id {body.previous_response_id!r} not found (only "
                    "the newest stored response of a conversation can be continued).",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            if split.history:
                await self._runner.store.sessions.set_lineage(
                    found, head
                )  # refused: it stays newest
                raise ApiError(
                    400,
                    "with previous_response_id, input holds only the new user messages",
                    param="input",
                )
            if not body.store:
                return await self._scratch_copy(found, head, body.user, owner), turn
            return found, turn
        return await self._conversations.start(split.history, user_id=body.user, owner=owner), turn

    async def _scratch_copy(self, session_id: str, head: str, user: str | None, owner: str) -> str:
        """A `store: false` continuation runs on a scratch copy of the chain's active set (the
        model sees the same conversation) and the chain keeps its head: the response it
        continued stays the newest stored one, continuable. The copy is deleted after."""
        try:
            active = await self._runner.store.transcript.load_active(session_id)
            info = await self._runner.store.sessions.create_session(
                platform="http", user_id=user, owner=owner
            )
            scratch = info.id
            await self._runner.store.transcript.append(scratch, [_unstamped(m) for m in active])
        finally:
            await self._runner.store.sessions.set_lineage(session_id, head)
        return scratch

    async def _turn(
        self,
        inbound: InboundMessage,
        sink: Any,
        session_id: str,
        turn: tuple[ChatMessage, ...],
        shell: _Shell,
        options: TurnOptions,
    ) -> TurnOutcome:
        """Run the turn; a stored, answered response becomes its session's head (before the
        client hears the end, so it may continue at once)."""
        outcome = await self._runner.submit(
            inbound, sink, session_id=session_id, said=turn, options=options
        )
        shell.ended_on = outcome.session_id
        if not shell.body.store:
            return outcome  # no head: a `store: false` response cannot be continued
        answered = outcome.kind == "reply"
        head = _HEAD_PREFIX + shell.response_id if answered else None
        previous = shell.body.previous_response_id
        if isinstance(outcome.error, MessageTooLong) and previous is not None:
            head = _HEAD_PREFIX + previous  # refused before anything was stored: it stays newest
        if outcome.session_id != session_id:
            await self._runner.store.sessions.set_lineage(session_id, None)
        await self._runner.store.sessions.set_lineage(outcome.session_id, head)
        return outcome

    async def _drop_scratch(self, session_id: str, shell: _Shell) -> None:
        """Nothing of a `store: false` request outlives it (deleting twice is harmless)."""
        if not shell.body.store:
            for scratch in {session_id, shell.ended_on or session_id}:  # a rotation moved it
                await asyncio.shield(self._runner.forget_agent(scratch, delete=True))

    async def _stream(
        self,
        request: web.Request,
        inbound: InboundMessage,
        session_id: str,
        turn: tuple[ChatMessage, ...],
        shell: _Shell,
        options: TurnOptions,
    ) -> web.StreamResponse:
        headers = {"Content-Type": "text/event-stream"}
        if shell.body.store:
            headers[SESSION_HEADER] = session_id
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        sink = _EventSink(response, shell)
        await sink.open()
        outcome = await asyncio.shield(self._turn(inbound, sink, session_id, turn, shell, options))
        shell.model = outcome.model or shell.model
        await self._drop_scratch(session_id, shell)  # gone before the client reads the end
        await sink.close(outcome)
        if not sink.is_gone:
            await response.write_eof()
        return response


class _Shell:
    """The response object as it grows: its id, model and request fields, then its output."""

    def __init__(self, response_id: str, model: str, body: _ResponsesBody) -> None:
        self.response_id, self.model, self.body = response_id, model, body
        self.item_id = f"msg_{uuid.uuid4().hex}"
        self.created_at = int(time.time())
        self.ended_on: str | None = None
        """The session the turn ended on (a rotating compaction moves it)."""

    def envelope(self, status: str) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.model,
            "status": status,
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": self.body.tools or [],
            "instructions": self.body.instructions,
            "previous_response_id": self.body.previous_response_id,
            "store": self.body.store,
            "error": None,
            "incomplete_details": None,
            "metadata": {},
            "text": {"format": {"type": "text"}},
            "usage": None,
        }

    def item(self, text: str, status: str) -> dict[str, Any]:
        content = [] if status == "in_progress" else [self.part(text)]
        return {
            "type": "message",
            "id": self.item_id,
            "role": "assistant",
            "status": status,
            "content": content,
        }

    @staticmethod
    def part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def completed(self, outcome: TurnOutcome) -> dict[str, Any]:
        status = "completed" if outcome.kind in ("reply", "command") else "failed"
        response = self.envelope(status)
        calls = _calls(outcome)
        said = [self.item(outcome.reply, "completed")] if outcome.reply or not calls else []
        response["output"] = [*said, *(function_call_item(c) for c in calls)]
        response["usage"] = _usage(outcome)
        if status == "failed":
            refusal = outcome_error(outcome)
            code = (refusal.code or refusal.kind) if refusal is not None else "server_error"
            message = refusal.message if refusal is not None else outcome.reply
            response["error"] = {"code": code, "message": message}
        return response


def _unstamped(message: ChatMessage) -> ChatMessage:
    """A stored message as a new one: without the row id and persisted stamp of its session."""
    copy: dict[str, Any] = {k: v for k, v in message.items() if k not in ("_id", "_persisted")}
    return copy  # type: ignore[return-value]


def _calls(outcome: TurnOutcome) -> tuple[ToolCall, ...]:
    """The client tools the turn ended calling."""
    return outcome.turn.tool_calls if outcome.turn is not None else ()


def _usage(outcome: TurnOutcome) -> dict[str, Any]:
    usage = outcome.usage
    prompt, output, cached = (
        (usage.prompt_tokens, usage.output_tokens, usage.cache_read_tokens) if usage else (0, 0, 0)
    )
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }


class _EventSink:
    """Streams the turn as Responses events; the client going away stops the writing only.

    The message item opens with the first text (a turn that only calls client tools has none);
    each client tool call follows as a `function_call` item: `response.output_item.added`,
    `response.function_call_arguments.delta` / `.done`, `response.output_item.done`."""

    streams = True

    def __init__(self, response: web.StreamResponse, shell: _Shell) -> None:
        self._response, self._shell = response, shell
        self._sequence = 0
        self._text = ""
        self._message_open = False
        self.is_gone = False

    async def _event(self, kind: str, **fields: Any) -> None:
        if self.is_gone:
            return
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        data = f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"
        try:
            await self._response.write(data.encode())
        except ConnectionResetError:
            self.is_gone = True
            log.info("http_client_went_away")

    async def open(self) -> None:
        shell = self._shell
        await self._event("response.created", response=shell.envelope("in_progress"))
        await self._event("response.in_progress", response=shell.envelope("in_progress"))

    async def _open_message(self) -> None:
        if self._message_open:
            return
        self._message_open = True
        shell = self._shell
        where = {"output_index": 0}
        await self._event("response.output_item.added", item=shell.item("", "in_progress"), **where)
        part = {"item_id": shell.item_id, "content_index": 0, **where}
        await self._event("response.content_part.added", part=shell.part(""), **part)

    async def start(self, session_id: str) -> None: ...
    async def notice(self, text: str) -> None: ...

    async def on_text(self, delta: str) -> None:
        await self._open_message()
        self._text += delta
        where = {"item_id": self._shell.item_id, "output_index": 0, "content_index": 0}
        await self._event("response.output_text.delta", delta=delta, logprobs=[], **where)

    async def finish(self, text: str) -> None:
        if not self._text and text:  # commands and errors arrive whole
            await self.on_text(text)

    async def close(self, outcome: TurnOutcome) -> None:
        shell, text = self._shell, self._text or outcome.reply
        calls = _calls(outcome)
        if text or not calls:
            await self._open_message()
            where = {"item_id": shell.item_id, "output_index": 0, "content_index": 0}
            await self._event("response.output_text.done", text=text, logprobs=[], **where)
            await self._event("response.content_part.done", part=shell.part(text), **where)
            await self._event(
                "response.output_item.done", item=shell.item(text, "completed"), output_index=0
            )
        first = 1 if self._message_open else 0
        for index, call in enumerate(calls, start=first):
            await self._function_call(call, index)
        final = shell.completed(outcome)
        kind = "response.completed" if final["status"] == "completed" else "response.failed"
        await self._event(kind, response=final)

    async def _function_call(self, call: ToolCall, index: int) -> None:
        item = function_call_item(call)
        pending = function_call_item(call, status="in_progress")
        await self._event("response.output_item.added", item=pending, output_index=index)
        where = {"item_id": item["id"], "output_index": index}
        arguments = item["arguments"]
        for start in range(0, len(arguments), _ARGUMENT_CHUNK_CHARS):
            piece = arguments[start : start + _ARGUMENT_CHUNK_CHARS]
            await self._event("response.function_call_arguments.delta", delta=piece, **where)
        await self._event("response.function_call_arguments.done", arguments=arguments, **where)
        await self._event("response.output_item.done", item=item, output_index=index)
