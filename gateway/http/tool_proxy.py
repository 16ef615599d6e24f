"""Client tools over Chat Completions: the turn's options, its new messages, and the OpenAI shape
of the tool calls it ends with (a whole message, or stream deltas).

When a request carries `tools`, Hermes is a transparent agent proxy for it: the client's tools,
not Hermes' own, go to the model; a call to one ends the turn and comes back as
`message.tool_calls` with `finish_reason: "tool_calls"` (streamed as `delta.tool_calls` chunks,
by index: id, type and name first, then the arguments), and the client's next request, carrying
one `role: tool` message per call, continues the turn. Contract: the OpenAI API reference,
"Create chat completion" and "The chat completion chunk object"
(https://platform.openai.com/docs/api-reference/chat/create,
https://platform.openai.com/docs/api-reference/chat-streaming/streaming), as the openai SDK's
`ChatCompletionStreamState` accumulates it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent.errors import TurnRefused
from agent.messages import ChatMessage, ToolCall
from agent.providers.call_options import Wire, wire_of
from agent.turn_options import TurnOptions
from gateway.http.client_request import ChatRequest, refuse_unsupported
from gateway.http.error_envelope import ApiError

if TYPE_CHECKING:
    from agent.config import HermesConfig

__all__ = [
    "ARGUMENT_CHUNK_CHARS",
    "checked_options",
    "new_messages",
    "refusal_of",
    "route_wire",
    "tool_call_deltas",
    "tool_calls_json",
]

ARGUMENT_CHUNK_CHARS = 256
"""Streamed arguments are cut into pieces of this size, as a model streams them."""


def route_wire(config: HermesConfig) -> Wire:
    """The wire the configured model route speaks."""
    return wire_of(config.model.provider, config.model.api_mode)


def checked_options(request: ChatRequest, wire: Wire) -> TurnOptions:
    """The turn's options; raises ApiError 400 naming a field the route cannot carry."""
    refuse_unsupported(request, wire)
    if request.tools is not None and wire == "codex_app_server":
        raise ApiError(
            400,
            "tools cannot be honoured on this server's model route: the codex app-server runs "
            "its own tools",
            "invalid_request_error",
            param="tools",
        )
    return TurnOptions(call=request.options, client_tools=request.tools)


def new_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The new messages of a session-mode request (the store holds the history): the trailing
    `role: tool` results when the request ends with them, else its newest user message."""
    tail: list[ChatMessage] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        tail.append(message)
    if tail:
        return tail[::-1]
    for message in reversed(messages):
        if message.get("role") == "user":
            return [message]
    return []


def refusal_of(error: TurnRefused, request_messages: int, said: int) -> ApiError:
    """The 400 for new messages the session refused; `param` points into the request's
    `messages` (the `said` new messages are its last ones)."""
    param = "messages"
    if error.index is not None:
        param = f"messages[{request_messages - said + error.index}]"
        if error.field:
            param += f".{error.field}"
    return ApiError(400, str(error), "invalid_request_error", param=param)


def tool_calls_json(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """`message.tool_calls` of a chat completion."""
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
            },
        }
        for call in calls
    ]


def tool_call_deltas(calls: Sequence[ToolCall], *, first: bool) -> list[dict[str, Any]]:
    """`choices[0].delta` of each chunk streaming `calls`: per call, one delta with its index,
    id, type, name and empty arguments, then its arguments in pieces. `first`: no delta was
    sent yet, so the first one carries the role."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        head: dict[str, Any] = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        deltas.append({"tool_calls": [head]})
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), ARGUMENT_CHUNK_CHARS):
            piece = arguments[start : start + ARGUMENT_CHUNK_CHARS]
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    if first and deltas:
        deltas[0] = {"role": "assistant", "content": None, **deltas[0]}
    return deltas
