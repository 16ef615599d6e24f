"""Responses API items <-> chat messages, and client function tools: pure, no I/O.

Contract: OpenAI API reference, "Responses" / "Create a model response"
(https://platform.openai.com/docs/api-reference/responses/create): `input` is a string or a list
of items. A `message` item has a role and content (a string, or `input_text` / `output_text`
parts); a `function_call` item is a call the model made (`call_id`, `name`, `arguments`); a
`function_call_output` item answers one (`call_id`, `output`). `tools` holds function tools in
the flat Responses shape (`{"type": "function", "name", "description", "parameters", "strict"}`)
and `tool_choice` is `"auto" | "none" | "required"` or `{"type": "function", "name"}`. A turn
that ends calling a client tool answers `function_call` output items (status `completed`); the
client runs the tools and continues with `function_call_output` items, as over Chat Completions
(`gateway.http.tool_proxy`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from agent.messages import ToolCall
from agent.providers.base import ToolSpec
from agent.providers.call_options import CallOptions
from gateway.http.error_envelope import ApiError

__all__ = [
    "call_options",
    "client_tools",
    "function_call_item",
    "input_messages",
]

_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_CHOICES = frozenset({"auto", "none", "required"})


def input_messages(value: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`input` as chat messages: a string is one user message; `message` items (or items
    without a type) keep their role and content; consecutive `function_call` items become one
    assistant message with `tool_calls`; each `function_call_output` a `role: tool` message.
    Other item types are a 400 naming the item."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    messages: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise ApiError(400, f"input[{index}] is not an object", param=f"input[{index}]")
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, index))
        elif kind == "function_call":
            call = _function_call(item, index)
            names[call["id"]] = call["function"]["name"]
            last = messages[-1] if messages else None
            if last is not None and last.get("role") == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            call_id = _text_field(item, "call_id", index)
            output = item.get("output")
            if not isinstance(output, str):
                raise ApiError(
                    400, f"input[{index}].output must be a string", param=f"input[{index}].output"
                )
            tool = {"role": "tool", "tool_call_id": call_id, "content": output}
            messages.append({**tool, "name": names.get(call_id, "")})
        elif kind == "reasoning":
            continue  # our own reasoning is not replayed; a client echoing it back is harmless
        else:
            raise ApiError(
                400,
                f"input[{index}] is a {kind!r} item; this server takes message, function_call "
                "and function_call_output items",
                param=f"input[{index}].type",
            )
    return messages


def client_tools(tools: Sequence[Any] | None) -> tuple[ToolSpec, ...] | None:
    """The request's function tools; None when it sent none (Hermes' own tools serve the
    turn). Built-in tool types (web search, file search, computer use) are a 400."""
    if not tools:
        return None
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise ApiError(
                400, f"{where} is a {kind!r} tool; only function tools are supported", param=where
            )
        name = tool.get("name")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise ApiError(400, f"{where}.name must be a name of 1-64 characters", param=where)
        if name in seen:
            raise ApiError(400, f"tool name {name!r} is defined twice", param=f"{where}.name")
        seen.add(name)
        parameters = tool.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise ApiError(400, f"{where}.parameters must be an object", param=where)
        strict = tool.get("strict")
        specs.append(
            ToolSpec(
                name=name,
                description=str(tool.get("description") or ""),
                parameters=parameters,
                strict=strict if isinstance(strict, bool) else None,
            )
        )
    return tuple(specs)


def call_options(tool_choice: Any, tools: tuple[ToolSpec, ...] | None) -> CallOptions:
    """`tool_choice` as the turn's call options (a 400 for one the request cannot honour)."""
    if tool_choice is None:
        return CallOptions()
    choice: str
    if isinstance(tool_choice, str) and tool_choice in _CHOICES:
        choice = tool_choice
    elif isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        choice = str(tool_choice.get("name") or "")
        if tools is None or choice not in {t.name for t in tools}:
            raise ApiError(
                400,
                f"tool_choice names {choice!r}, which is not one of the request's tools",
                param="tool_choice",
            )
    else:
        raise ApiError(400, "tool_choice is not one this server supports", param="tool_choice")
    if tools is None and choice != "none":
        raise ApiError(400, "tool_choice is only allowed when tools are given", param="tool_choice")
    return CallOptions(tool_choice=choice)


def function_call_item(call: ToolCall, status: str = "completed") -> dict[str, Any]:
    """A `function_call` output item for one client tool call."""
    arguments = call["function"]["arguments"] if status == "completed" else ""
    return {
        "type": "function_call",
        "id": f"fc_{uuid.uuid5(uuid.NAMESPACE_OID, call['id']).hex}",
        "call_id": call["id"],
        "name": call["function"]["name"],
        "arguments": arguments,
        "status": status,
    }


def _message(item: dict[str, Any], index: int) -> dict[str, Any]:
    content = item.get("content")
    for part_index, part in enumerate(content if isinstance(content, list) else []):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_image" and item.get("role") == "user":
            continue  # taken by `gateway.http.image_parts` before the turn
        if kind not in _TEXT_PARTS:
            raise ApiError(
                400,
                f"input[{index}].content[{part_index}] is a {kind!r} part; this server "
                "takes text and images only (input_text, output_text, input_image)",
                param=f"input[{index}].content[{part_index}].type",
            )
    return {"role": item.get("role"), "content": content}


def _function_call(item: dict[str, Any], index: int) -> ToolCall:
    arguments = item.get("arguments", "")
    if not isinstance(arguments, str):
        raise ApiError(
            400, f"input[{index}].arguments must be a string", param=f"input[{index}].arguments"
        )
    return {
        "id": _text_field(item, "call_id", index),
        "type": "function",
        "function": {"name": _text_field(item, "name", index), "arguments": arguments},
    }


def _text_field(item: dict[str, Any], key: str, index: int) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise ApiError(400, f"input[{index}].{key} is required", param=f"input[{index}].{key}")
    return value
