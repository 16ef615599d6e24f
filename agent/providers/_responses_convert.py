"""Canonical messages <-> OpenAI Responses input/output items: pure functions, no SDK import.

Opaque items the server returns for replay (compaction checkpoints, reasoning with encrypted
content) ride on the assistant message under `_replay_items`, tagged with `_replay_endpoint`.
On later requests they are replayed before that message's own content, but only to the endpoint
that issued them. The newest replayable compaction item stands in for everything before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent.messages import ChatMessage, ToolCall, content_text
from agent.providers._usage import UsageShape, usage_from_openai_style
from agent.providers.base import ProviderReply, ProviderRequest, StopReason, ToolSpec
from agent.providers.call_options import responses_fields

__all__ = [
    "REPLAY_ENDPOINT_KEY",
    "REPLAY_ITEMS_KEY",
    "RESPONSES_USAGE",
    "messages_to_input",
    "reply_from_response",
    "request_to_responses",
    "tools_to_responses",
    "wants_encrypted_reasoning",
]

Item = dict[str, Any]

REPLAY_ITEMS_KEY = "_replay_items"
REPLAY_ENDPOINT_KEY = "_replay_endpoint"
_FORBIDDEN_EXTRA = ("previous_response_id", "store", "input", "instructions")
"""`store=False` and client-side replay are the contract; `extra` cannot undo them."""
_REASONING_MODEL_PREFIXES = ("gpt-5", "o1", "o3", "o4", "codex")
RESPONSES_USAGE = UsageShape(
    prompt="input_tokens",
    output="output_tokens",
    details="input_tokens_details",
)


def request_to_responses(
    request: ProviderRequest,
    *,
    endpoint: str,
    context_management: dict[str, Any] | None = None,
    send_max_tokens: bool = True,
) -> dict[str, Any]:
    """The JSON body of POST /responses (without `stream`)."""
    instructions, items = messages_to_input(request.messages, endpoint=endpoint)
    kwargs: dict[str, Any] = {"model": request.model, "input": items, "store": False}
    if instructions:
        kwargs["instructions"] = instructions
    if send_max_tokens:
        kwargs["max_output_tokens"] = request.max_tokens
    if request.tools:
        kwargs["tools"] = tools_to_responses(request.tools)
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    if wants_encrypted_reasoning(request.model):
        kwargs["include"] = ["reasoning.encrypted_content"]
    kwargs.update(responses_fields(request.options))
    kwargs.update({k: v for k, v in request.extra.items() if k not in _FORBIDDEN_EXTRA})
    if context_management is not None:
        kwargs["context_management"] = [context_management]
    return kwargs


def wants_encrypted_reasoning(model: str) -> bool:
    """Reasoning models: with `store=False` their reasoning only survives as encrypted content."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return name.startswith(_REASONING_MODEL_PREFIXES)


def tools_to_responses(tools: Sequence[ToolSpec]) -> list[Item]:
    """Responses function tools are flat (no nested `function` object)."""
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            **({} if t.strict is None else {"strict": t.strict}),
        }
        for t in tools
    ]


def messages_to_input(
    messages: Sequence[ChatMessage], *, endpoint: str
) -> tuple[str | None, list[Item]]:
    """(instructions, input items). Leading system messages become `instructions`."""
    start = 0
    system_texts: list[str] = []
    while start < len(messages) and messages[start].get("role") == "system":
        system_texts.append(content_text(messages[start]))
        start += 1
    rest = messages[start:]
    checkpoint = _latest_checkpoint(rest, endpoint)
    items: list[Item] = []
    for index, msg in enumerate(rest):
        if checkpoint is not None and index < checkpoint:
            continue  # carried by the compaction item
        items.extend(_message_items(msg, endpoint, from_checkpoint=index == checkpoint))
    instructions = "\n\n".join(t for t in system_texts if t) or None
    return instructions, items


def reply_from_response(response: dict[str, Any], *, endpoint: str) -> ProviderReply:
    """A `Response` (as a dict) -> canonical assistant message, usage, stop reason."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    replay: list[Item] = []
    for item in response.get("output") or ():
        kind = item.get("type")
        if kind == "message":
            texts.append(_output_text(item))
        elif kind == "function_call":
            calls.append(_tool_call(item, len(calls)))
        elif kind in ("compaction", "reasoning"):
            kept = _replayable(item)
            if kept is not None:
                replay.append(kept)
    text = "".join(texts)
    message: ChatMessage = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = calls
    if replay:
        message["_replay_items"] = replay  # type: ignore[typeddict-unknown-key]
        message["_replay_endpoint"] = endpoint  # type: ignore[typeddict-unknown-key]
    compactions = [i for i in replay if i["type"] == "compaction"]
    return ProviderReply(
        message=message,
        usage=usage_from_openai_style(response.get("usage") or {}, RESPONSES_USAGE),
        stop_reason=_stop_reason(response, has_tool_calls=bool(calls)),
        model=str(response.get("model") or ""),
        raw={
            "id": response.get("id"),
            "status": response.get("status"),
            "compaction_items": compactions,
            "native_compaction": bool(compactions),
        },
    )


def _latest_checkpoint(messages: Sequence[ChatMessage], endpoint: str) -> int | None:
    """Index of the newest assistant message carrying a compaction item from `endpoint`."""
    for index in range(len(messages) - 1, -1, -1):
        items = _replay_items_for(messages[index], endpoint)
        if any(item.get("type") == "compaction" for item in items):
            return index
    return None


def _replay_items_for(msg: ChatMessage, endpoint: str) -> list[Item]:
    """The message's replay items if `endpoint` issued them; other issuers' are dropped."""
    if msg.get("role") != "assistant":
        return []
    meta: dict[str, Any] = msg  # type: ignore[assignment]
    items = meta.get(REPLAY_ITEMS_KEY) or []
    if not items or meta.get(REPLAY_ENDPOINT_KEY) != endpoint:
        return []
    return [dict(item) for item in items if isinstance(item, dict)]


def _message_items(msg: ChatMessage, endpoint: str, *, from_checkpoint: bool) -> list[Item]:
    role = msg.get("role")
    if role == "assistant":
        replay = _replay_items_for(msg, endpoint)
        if from_checkpoint:
            last = max(i for i, item in enumerate(replay) if item.get("type") == "compaction")
            replay = replay[last:]
        return [*replay, *_assistant_items(msg)]
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": str(msg.get("tool_call_id") or ""),
                "output": content_text(msg),
            }
        ]
    wire_role = "developer" if role == "system" else "user"
    return [{"type": "message", "role": wire_role, "content": _input_content(msg)}]


def _assistant_items(msg: ChatMessage) -> list[Item]:
    items: list[Item] = []
    text = content_text(msg)
    if text:
        items.append({"type": "message", "role": "assistant", "content": text})
    for call in msg.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": function.get("name", ""),
                "arguments": function.get("arguments") or "{}",
            }
        )
    return items


def _input_content(msg: ChatMessage) -> list[Item]:
    content = msg.get("content")
    if isinstance(content, list):
        parts = [_input_part(block) for block in content if isinstance(block, dict)]
        kept = [p for p in parts if p is not None]
        if kept:
            return kept
    return [{"type": "input_text", "text": content_text(msg)}]


def _input_part(block: dict[str, Any]) -> Item | None:
    if block.get("type") == "text":
        return (
            {"type": "input_text", "text": str(block.get("text", ""))}
            if block.get("text")
            else None
        )
    if block.get("type") == "image_url":
        image = block.get("image_url") or {}
        url = image.get("url") if isinstance(image, dict) else image
        return {"type": "input_image", "image_url": str(url), "detail": "auto"} if url else None
    return None


def _output_text(item: dict[str, Any]) -> str:
    parts: Iterable[dict[str, Any]] = item.get("content") or ()
    return "".join(str(p.get("text") or "") for p in parts if p.get("type") == "output_text")


def _tool_call(item: dict[str, Any], index: int) -> ToolCall:
    return {
        "id": str(item.get("call_id") or item.get("id") or f"call_{index}"),
        "type": "function",
        "function": {
            "name": str(item.get("name") or ""),
            "arguments": str(item.get("arguments") or ""),
        },
    }


def _replayable(item: dict[str, Any]) -> Item | None:
    """The input form of an opaque output item; reasoning without encrypted content is useless
    with `store=False` (the server cannot look it up), so it is not kept."""
    encrypted = item.get("encrypted_content")
    if not encrypted:
        return None
    if item.get("type") == "compaction":
        kept: Item = {"type": "compaction", "encrypted_content": encrypted}
    else:
        kept = {"type": "reasoning", "summary": list(item.get("summary") or [])}
        kept["encrypted_content"] = encrypted
    if item.get("id"):
        kept["id"] = item["id"]
    return kept


def _stop_reason(response: dict[str, Any], *, has_tool_calls: bool) -> StopReason:
    details = response.get("incomplete_details") or {}
    if response.get("status") == "incomplete" and details.get("reason") == "max_output_tokens":
        return "max_tokens"
    return "tool_use" if has_tool_calls else "end"
