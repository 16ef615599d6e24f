"""Canonical messages <-> OpenAI Chat Completions payloads: pure functions, no SDK import."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent.messages import ChatMessage, ToolCall
from agent.providers._usage import UsageShape, usage_from_openai_style
from agent.providers.base import (
    IncompleteReply,
    ProviderReply,
    ProviderRequest,
    StopReason,
    ToolSpec,
)
from agent.providers.call_options import openai_chat_fields

__all__ = [
    "CHAT_COMPLETIONS_USAGE",
    "OpenAIStreamAccumulator",
    "messages_to_openai",
    "reply_from_openai",
    "request_to_openai",
    "stop_reason_from_openai",
    "tools_to_openai",
]

Block = dict[str, Any]

_WIRE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end",
    "content_filter": "end",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}
CHAT_COMPLETIONS_USAGE = UsageShape(
    prompt="prompt_tokens",
    output="completion_tokens",
    details="prompt_tokens_details",
)


def request_to_openai(
    request: ProviderRequest, *, accepts_cache_control: bool, max_tokens_key: str = "max_tokens"
) -> dict[str, Any]:
    """The JSON body of POST /chat/completions; `request.extra` is merged last."""
    kwargs: dict[str, Any] = {
        "model": request.model,
        "messages": messages_to_openai(
            request.messages, accepts_cache_control=accepts_cache_control
        ),
        max_tokens_key: request.max_tokens,
    }
    if request.tools:
        kwargs["tools"] = tools_to_openai(request.tools)
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    kwargs.update(openai_chat_fields(request.options))
    kwargs.update(request.extra)
    return kwargs


def messages_to_openai(
    messages: Iterable[ChatMessage], *, accepts_cache_control: bool
) -> list[dict[str, Any]]:
    """Strip `_` metadata; place or remove cache markers depending on the route."""
    return [_message_to_openai(m, accepts_cache_control) for m in messages]


def tools_to_openai(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                **({} if t.strict is None else {"strict": t.strict}),
            },
        }
        for t in tools
    ]


def reply_from_openai(completion: dict[str, Any]) -> ProviderReply:
    """A `ChatCompletion` (as a dict) -> the canonical assistant message, usage and stop.

    Raises `IncompleteReply` for a body that is no finished completion: the OpenAI API reference
    ("The chat completion object") makes `choices[].message` and `choices[].finish_reason`
    required; a stream folded without its final chunk has no finish reason either."""
    choices = completion.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise IncompleteReply("the body is not a chat completion (no choices[0].message)")
    wire = choice["message"]
    if not choice.get("finish_reason"):
        partial = wire.get("content")
        raise IncompleteReply(
            "the reply ended without a finish reason",
            partial=partial if isinstance(partial, str) else "",
        )
    calls: list[ToolCall] = [_tool_call(c, i) for i, c in enumerate(wire.get("tool_calls") or ())]
    text = wire.get("content")
    canonical: ChatMessage = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        canonical["tool_calls"] = calls
    finish = choice.get("finish_reason")
    return ProviderReply(
        message=canonical,
        usage=usage_from_openai_style(completion.get("usage") or {}, CHAT_COMPLETIONS_USAGE),
        stop_reason=stop_reason_from_openai(finish, has_tool_calls=bool(calls)),
        model=str(completion.get("model") or ""),
        raw={"id": completion.get("id"), "finish_reason": finish},
    )


def stop_reason_from_openai(raw: str | None, *, has_tool_calls: bool) -> StopReason:
    """Local servers often say "stop" next to tool calls; the calls decide then."""
    if raw == "length":
        return "max_tokens"
    if has_tool_calls:
        return "tool_use"
    return _STOP_REASONS.get(raw or "stop", "end")


class OpenAIStreamAccumulator:
    """Folds `ChatCompletionChunk` dicts into a `ChatCompletion` dict; tool calls by index."""

    __slots__ = ("_calls", "_finish", "_meta", "_text", "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: dict[str, Any] = {}
        self._meta: dict[str, Any] = {}

    def add(self, chunk: dict[str, Any]) -> str | None:
        """Take one chunk; return the text delta it carries, if any."""
        for key in ("id", "model"):
            if chunk.get(key):
                self._meta[key] = chunk[key]
        if chunk.get("usage"):
            self._usage = dict(chunk["usage"])
        text: list[str] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
            for call in delta.get("tool_calls") or ():
                self._add_call(call)
            if delta.get("content"):
                text.append(str(delta["content"]))
        joined = "".join(text)
        self._text.append(joined)
        return joined or None

    def completion(self) -> dict[str, Any]:
        """The accumulated reply in the shape of a non-streamed completion."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        return {
            **self._meta,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
            "usage": self._usage,
        }

    def _add_call(self, delta: dict[str, Any]) -> None:
        index = int(delta.get("index") or 0)
        call = self._calls.setdefault(
            index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if delta.get("id"):
            call["id"] = delta["id"]
        function = delta.get("function") or {}
        if function.get("name"):
            call["function"]["name"] += function["name"]
        if function.get("arguments"):
            call["function"]["arguments"] += function["arguments"]


def _message_to_openai(msg: ChatMessage, accepts_cache_control: bool) -> dict[str, Any]:
    out = {k: v for k, v in msg.items() if k in _WIRE_KEYS}
    if out.get("role") == "tool":
        out.pop("name", None)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = _clean_blocks(content, accepts_cache_control)
        if not out["content"]:
            out["content"] = None if msg.get("tool_calls") else ""
    marker = msg.get("cache_control")
    if accepts_cache_control and marker:
        _place_marker(out, dict(marker))
    return out


def _clean_blocks(blocks: list[Any], keep_markers: bool) -> list[Block]:
    cleaned: list[Block] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        copy = dict(block)
        if not keep_markers:
            copy.pop("cache_control", None)
        cleaned.append(copy)
    return cleaned


def _place_marker(message: dict[str, Any], marker: dict[str, str]) -> None:
    """Put a message-level marker on the last content block; empty content carries none."""
    content = message.get("content")
    if isinstance(content, str) and content:
        message["content"] = [{"type": "text", "text": content, "cache_control": marker}]
    elif isinstance(content, list) and content:
        content[-1] = {**content[-1], "cache_control": marker}


def _tool_call(call: dict[str, Any], index: int) -> ToolCall:
    """Some local servers send no call id; the agent pairs results by id, so invent one."""
    function = call.get("function") or {}
    return {
        "id": str(call.get("id") or f"call_{index}"),
        "type": "function",
        "function": {
            "name": str(function.get("name") or ""),
            "arguments": str(function.get("arguments") or ""),
        },
    }
