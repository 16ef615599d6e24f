"""Canonical messages <-> Anthropic Messages API payloads: pure functions, no SDK import."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from agent.messages import ChatMessage, ToolCall
from agent.providers.base import (
    IncompleteReply,
    ProviderReply,
    ProviderRequest,
    StopReason,
    ToolSpec,
    Usage,
)
from agent.providers.call_options import anthropic_fields

__all__ = [
    "AnthropicStreamAccumulator",
    "reply_from_anthropic",
    "request_to_anthropic",
    "stop_reason_from_anthropic",
    "system_to_anthropic",
    "messages_to_anthropic",
    "tools_to_anthropic",
    "usage_from_anthropic",
]

Block = dict[str, Any]

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "pause_turn": "end",
    "refusal": "end",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
}


def request_to_anthropic(request: ProviderRequest) -> dict[str, Any]:
    """The JSON body of POST /v1/messages; `request.extra` is merged last and wins."""
    system = [m for m in request.messages if m.get("role") == "system"]
    rest = [m for m in request.messages if m.get("role") != "system"]
    kwargs: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages_to_anthropic(rest),
    }
    system_param = system_to_anthropic(system)
    if system_param:
        kwargs["system"] = system_param
    if request.tools:
        kwargs["tools"] = tools_to_anthropic(request.tools)
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    kwargs.update(anthropic_fields(request.options, has_tools=bool(request.tools)))
    kwargs.update(request.extra)
    return kwargs


def system_to_anthropic(messages: Sequence[ChatMessage]) -> str | list[Block]:
    """System messages -> one string, or text blocks when any of them carries a cache marker."""
    blocks: list[Block] = []
    for msg in messages:
        blocks.extend(_with_message_marker(_text_blocks(msg.get("content")), msg))
    if any("cache_control" in b for b in blocks):
        return blocks
    return "\n\n".join(str(b["text"]) for b in blocks)


def messages_to_anthropic(messages: Iterable[ChatMessage]) -> list[dict[str, Any]]:
    """Non-system messages -> alternating user/assistant messages of content blocks.

    Tool results become `tool_result` blocks in a user message; consecutive same-role messages
    are merged; messages that emit no block are skipped.
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        role = "assistant" if msg.get("role") == "assistant" else "user"
        blocks = _with_message_marker(_blocks_for(msg), msg)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def tools_to_anthropic(tools: Sequence[ToolSpec]) -> list[Block]:
    return [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": t.parameters,
            **({} if t.strict is None else {"strict": t.strict}),
        }
        for t in tools
    ]


def reply_from_anthropic(message: dict[str, Any]) -> ProviderReply:
    """An Anthropic `Message` (as a dict) -> the canonical assistant message, usage and stop.

    Raises `IncompleteReply` for no finished message: the Messages API reference makes
    `content` a list and gives every finished message a `stop_reason` (a stream sets it in its
    `message_delta` event, so a stream cut before that has none)."""
    if not isinstance(message.get("content"), list):
        raise IncompleteReply("the body is not a message (no content list)")
    if not message.get("stop_reason"):
        partial = "".join(
            str(b.get("text") or "") for b in message["content"] if b.get("type") == "text"
        )
        raise IncompleteReply("the reply ended without a stop reason", partial=partial)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.get("content") or ():
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            calls.append(_tool_call(block))
    text = "".join(texts)
    canonical: ChatMessage = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        canonical["tool_calls"] = calls
    stop_raw = message.get("stop_reason")
    return ProviderReply(
        message=canonical,
        usage=usage_from_anthropic(message.get("usage") or {}),
        stop_reason=stop_reason_from_anthropic(stop_raw, has_tool_calls=bool(calls)),
        model=str(message.get("model") or ""),
        raw={"id": message.get("id"), "stop_reason": stop_raw},
    )


def usage_from_anthropic(usage: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
    )


def stop_reason_from_anthropic(raw: str | None, *, has_tool_calls: bool) -> StopReason:
    if raw is None:
        return "tool_use" if has_tool_calls else "end"
    return _STOP_REASONS.get(raw, "end")


class AnthropicStreamAccumulator:
    """Folds raw stream events (dicts) into a `Message` dict; tolerant of bad tool JSON."""

    __slots__ = ("_json_parts", "message")

    def __init__(self) -> None:
        self.message: dict[str, Any] = {"content": [], "usage": {}}
        self._json_parts: dict[int, list[str]] = {}

    def add(self, event: dict[str, Any]) -> str | None:
        """Take one event; return the text delta it carries, if any."""
        kind = event.get("type")
        if kind == "message_start":
            start = dict(event.get("message") or {})
            self.message = {**start, "content": list(start.get("content") or [])}
            self.message["usage"] = dict(start.get("usage") or {})
        elif kind == "content_block_start":
            self.message["content"].append(dict(event.get("content_block") or {}))
        elif kind == "content_block_delta":
            return self._add_delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "content_block_stop":
            self._finish_block(int(event.get("index", 0)))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if "stop_reason" in delta:
                self.message["stop_reason"] = delta["stop_reason"]
            usage = {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            self.message["usage"].update(usage)
        return None

    def _add_delta(self, index: int, delta: dict[str, Any]) -> str | None:
        block = self.message["content"][index]
        if delta.get("type") == "text_delta":
            text = str(delta.get("text") or "")
            block["text"] = str(block.get("text") or "") + text
            return text or None
        if delta.get("type") == "input_json_delta":
            self._json_parts.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        return None

    def _finish_block(self, index: int) -> None:
        parts = self._json_parts.pop(index, None)
        if parts is not None:
            self.message["content"][index]["input"] = _parse_object("".join(parts))


def _blocks_for(msg: ChatMessage) -> list[Block]:
    role = msg.get("role")
    if role == "tool":
        return [_tool_result(msg)]
    blocks = _text_blocks(msg.get("content"))
    if role == "assistant":
        blocks.extend(_tool_use(call) for call in msg.get("tool_calls") or ())
    return blocks


def _text_blocks(content: object) -> list[Block]:
    """Content as blocks: a string becomes one text block; empty text blocks are dropped."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return []
    blocks: list[Block] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        if block.get("type") == "image_url":
            if (image := _image_block(block)) is not None:
                blocks.append(image)
            continue
        blocks.append(dict(block))
    return blocks


def _image_block(block: Block) -> Block | None:
    """An OpenAI-style `image_url` part as an Anthropic image block (Messages API, "Vision":
    `source` is `base64` with `media_type` and `data`, or `url`); unusable parts are dropped."""
    image = block.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        return None
    out: Block
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header[len("data:") :].split(";", 1)[0]
        if not data or not header.endswith(";base64"):
            return None
        out = {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    else:
        out = {"type": "image", "source": {"type": "url", "url": url}}
    if "cache_control" in block:
        out["cache_control"] = block["cache_control"]
    return out


def _tool_result(msg: ChatMessage) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id", "")}
    content = msg.get("content")
    if isinstance(content, str):
        if content:
            block["content"] = content
    else:
        inner = _text_blocks(content)
        if inner:
            block["content"] = inner
    return block


def _tool_use(call: ToolCall) -> Block:
    function = call.get("function") or {}
    return {
        "type": "tool_use",
        "id": call.get("id", ""),
        "name": function.get("name", ""),
        "input": _parse_object(function.get("arguments") or ""),
    }


def _with_message_marker(blocks: list[Block], msg: ChatMessage) -> list[Block]:
    """A message-level `cache_control` goes on the last block emitted for the message."""
    marker = msg.get("cache_control")
    if marker and blocks:
        blocks[-1] = {**blocks[-1], "cache_control": dict(marker)}
    return blocks


def _tool_call(block: dict[str, Any]) -> ToolCall:
    arguments = json.dumps(block.get("input") or {}, ensure_ascii=False, separators=(",", ":"))
    return {
        "id": str(block.get("id") or ""),
        "type": "function",
        "function": {"name": str(block.get("name") or ""), "arguments": arguments},
    }


def _parse_object(text: str) -> dict[str, Any]:
    """JSON object text -> dict; anything else (invalid, not an object) -> {}."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
