"""The Anthropic Messages wire of the fake: request checks, prompt-cache usage, JSON and SSE replies.

Contract (https://docs.anthropic.com/en/api/messages, .../en/api/messages-streaming and
.../en/docs/build-with-claude/prompt-caching): `model`, `max_tokens` >= 1 and a non-empty
`messages` list are required; roles alternate freely between user and assistant, every
`tool_use` is answered by a `tool_result` at the start of the next user message; at most four
`cache_control` breakpoints, and a 1h one never after a 5m one. Streaming sends `event:` lines:
message_start (input and cache usage), ping, block start/deltas/stop, message_delta (stop reason
and cumulative output tokens), message_stop.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from sim.llm_server._http import fragments, invalid_request, split_deltas, sse_frame
from sim.llm_server._images import billed_image_tokens
from sim.llm_server._prompt import (
    TTL_SECONDS,
    PromptBlock,
    TtlCache,
    canonical_json,
    last_user_text,
    tokens_of_text,
)
from sim.llm_server._values import Answer, Api, ErrorReply, Exchange, Family, ReplyParts

__all__ = ["AnthropicWire", "anthropic_prompt_blocks", "validate_anthropic"]

MAX_BREAKPOINTS = 4
_STOP = {"end": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}
Block = dict[str, Any]


class AnthropicWire:
    """POST /v1/messages, with the TTL prompt cache scoped by model and key."""

    api: Api = "anthropic"
    family: Family = "anthropic"
    call_prefix = "toolu"

    def __init__(self) -> None:
        self._cache = TtlCache()

    def refuse(self, body: dict[str, Any], exchange: Exchange) -> ErrorReply | None:
        problem = validate_anthropic(body)
        return invalid_request(problem) if problem else None

    def user_text(self, body: dict[str, Any]) -> str:
        return last_user_text(body["messages"])

    def answer(self, body: dict[str, Any], reply: ReplyParts, exchange: Exchange) -> Answer:
        usage = self._usage(body, reply, exchange)
        message = _message(f"msg_fake_{exchange.new_id():04d}", body["model"], reply, usage)
        if not body.get("stream"):
            return Answer(usage=usage, json=message)
        return Answer(usage=usage, frames=[sse_frame(d, e) for e, d in _events(message)])

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        return sum(b.tokens for b in anthropic_prompt_blocks(body))

    def count(self, body: dict[str, Any]) -> dict[str, Any] | ErrorReply:
        """POST /v1/messages/count_tokens: the same arithmetic, no `max_tokens` needed."""
        problem = validate_anthropic(body, counting=True)
        if problem:
            return invalid_request(problem)
        return {"input_tokens": sum(b.tokens for b in anthropic_prompt_blocks(body))}

    def _usage(self, body: dict[str, Any], reply: ReplyParts, exchange: Exchange) -> dict[str, Any]:
        plan = self._cache.account(
            anthropic_prompt_blocks(body),
            salt=canonical_json([body["model"], exchange.key]),
            now=exchange.clock(),
            min_cache_tokens=exchange.min_cache_tokens,
        )
        written = plan.write_tokens_by_ttl
        return {
            "input_tokens": plan.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_creation_input_tokens": sum(written.values()),
            "cache_read_input_tokens": plan.read_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written.get("5m", 0),
                "ephemeral_1h_input_tokens": written.get("1h", 0),
            },
            "service_tier": "standard",
        }


def anthropic_prompt_blocks(body: dict[str, Any]) -> list[PromptBlock]:
    """tools -> system -> messages, one block each; a top-level marker marks the last block."""
    blocks = [_block("tool", tool) for tool in body.get("tools") or ()]
    system = body.get("system")
    if isinstance(system, str) and system:
        blocks.append(_block("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks.extend(_block("system", b) for b in system)
    for message in body["messages"]:
        blocks.extend(_block(message["role"], b) for b in _content(message))
    top = body.get("cache_control")
    if isinstance(top, dict) and blocks:
        last = blocks[-1]
        blocks[-1] = PromptBlock(identity=last.identity, tokens=last.tokens, ttl=_ttl(top))
    return blocks


def validate_anthropic(body: dict[str, Any], *, counting: bool = False) -> str | None:
    """The first reason the real Messages API would answer 400, or None."""
    problem = _check_top(body, counting) or _check_system(body.get("system"))
    problem = problem or _check_tools(body.get("tools"))
    if problem:
        return problem
    markers = [b["cache_control"] for b in _listed(body.get("system")) if "cache_control" in b]
    markers += [t["cache_control"] for t in body.get("tools") or () if "cache_control" in t]
    pending: set[str] = set()
    for index, message in enumerate(body["messages"]):
        problem = _check_message(index, message, pending, markers)
        if problem:
            return problem
    if pending:
        return f"messages: tool_use ids were found without tool_result blocks: {sorted(pending)}"
    return _check_markers(markers + ([body["cache_control"]] if "cache_control" in body else []))


def _check_top(body: dict[str, Any], counting: bool) -> str | None:
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    problem = None if counting else _check_max_tokens(body.get("max_tokens"))
    if problem:
        return problem
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    return None


def _check_max_tokens(max_tokens: Any) -> str | None:
    if max_tokens is None:
        return "max_tokens: Field required"
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return "max_tokens: Input should be a valid integer"
    if max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    return None


def _check_system(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return None
    if not isinstance(system, list):
        return "system: Input should be a valid string or a list of text blocks"
    for index, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            return f"system.{index}: Input should be a text block"
        if not isinstance(block.get("text"), str) or not block["text"]:
            return "system: text content blocks must be non-empty"
    return None


def _check_tools(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return f"tools.{index}: Input should be a valid dictionary"
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            return f"tools.{index}.name: Field required"
        if tool.get("type", "custom") == "custom" and not isinstance(
            tool.get("input_schema"), dict
        ):
            return f"tools.{index}.custom.input_schema: Field required"
    return None


def _check_message(index: int, message: Any, pending: set[str], markers: list[Any]) -> str | None:
    """Check one message; `pending` holds the tool_use ids the previous message left open."""
    where = f"messages.{index}"
    if not isinstance(message, dict):
        return f"{where}: Input should be a valid dictionary"
    role, content = message.get("role"), message.get("content")
    if role not in ("user", "assistant"):
        return f"{where}.role: Input should be 'user' or 'assistant'"
    if content == "" or content == []:
        return f"{where}: all messages must have non-empty content"
    if not isinstance(content, str | list):
        return f"{where}.content: Input should be a valid string or list"
    answered: set[str] = set()
    opened: set[str] = set()
    results, later_result = 0, False
    for position, block in enumerate(_content(message)):
        problem = _check_block(f"{where}.content.{position}", block)
        if problem:
            return problem
        if block["type"] == "tool_result":
            later_result = later_result or results < position
            results += 1
            answered.add(block["tool_use_id"])
        elif block["type"] == "tool_use":
            opened.add(block["id"])
        if "cache_control" in block:
            markers.append(block["cache_control"])
    if pending and (role != "user" or not pending <= answered):
        return f"{where}: tool_use ids were found without tool_result blocks immediately after"
    if answered - pending:
        return f"{where}: unexpected tool_use_id found in tool_result blocks"
    if later_result:
        return f"{where}: tool_result blocks must come first in the content"
    pending.clear()
    pending.update(opened)
    return None


def _check_block(where: str, block: Any) -> str | None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return f"{where}: Input should be a content block"
    kind = block["type"]
    if kind == "text" and not block.get("text"):
        return f"{where}: text content blocks must be non-empty"
    if kind == "tool_use" and not (_is_name(block.get("id")) and _is_name(block.get("name"))):
        return f"{where}.tool_use: id and name are required"
    if kind == "tool_result" and not _is_name(block.get("tool_use_id")):
        return f"{where}.tool_result.tool_use_id: Field required"
    if kind == "image":
        return _check_image(where, block.get("source"))
    return None


IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _check_image(where: str, source: Any) -> str | None:
    """Messages API, "Vision": `source` is base64 (`media_type` one of four, `data`) or url."""
    if not isinstance(source, dict) or source.get("type") not in ("base64", "url"):
        return f"{where}.image.source: Input tag does not match 'base64', 'url'"
    if source["type"] == "url":
        return (
            None
            if isinstance(source.get("url"), str)
            else f"{where}.image.source.url: Field required"
        )
    if source.get("media_type") not in IMAGE_TYPES:
        return f"{where}.image.source.base64.media_type: Input should be one of {IMAGE_TYPES}"
    try:
        base64.b64decode(str(source.get("data") or ""), validate=True)
    except binascii.Error:
        return f"{where}.image.source.base64.data: invalid base64 data"
    return None if source.get("data") else f"{where}.image.source.base64.data: Field required"


def _check_markers(markers: list[Any]) -> str | None:
    if len(markers) > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(markers)}."
        )
    seen_5m = False
    for marker in markers:
        if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
            return f"cache_control: invalid marker {marker!r}"
        if _ttl(marker) not in TTL_SECONDS:
            return f"cache_control: invalid marker {marker!r}"
        if _ttl(marker) == "1h" and seen_5m:
            return "a ttl='1h' cache_control block must not come after a ttl='5m' block"
        seen_5m = seen_5m or _ttl(marker) == "5m"
    return None


def _message(message_id: str, model: str, reply: ReplyParts, usage: dict[str, Any]) -> Block:
    content: list[Block] = [{"type": "text", "text": reply.text}] if reply.text else []
    for call_id, name, arguments in reply.tool_calls:
        content.append(
            {"type": "tool_use", "id": call_id, "name": name, "input": _object(arguments)}
        )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _STOP[reply.stop],
        "stop_sequence": None,
        "usage": usage,
    }


def _events(message: Block) -> list[tuple[str, Block]]:
    """The exact SSE event sequence for `message`: start, ping, blocks, delta, stop."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, Block]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        events.extend(_block_events(index, block))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: Block) -> list[tuple[str, Block]]:
    start: Block
    if block["type"] == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in split_deltas(block["text"])]
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        text = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in fragments(text)]
    head = {"type": "content_block_start", "index": index, "content_block": start}
    events = [("content_block_start", head)]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _block(role: str, block: Block) -> PromptBlock:
    bare = {k: v for k, v in block.items() if k != "cache_control"}
    if bare.get("type") == "text" and set(bare) <= {"type", "text"}:
        tokens = tokens_of_text(str(bare.get("text", "")))
    elif bare.get("type") == "image":  # the server counts pixels, not the base64 text
        source = bare.get("source") or {}
        tokens = billed_image_tokens(str(source.get("data") or ""), rule="anthropic")
    else:
        tokens = tokens_of_text(canonical_json(bare))
    marker = block.get("cache_control")
    ttl = _ttl(marker) if isinstance(marker, dict) else None
    return PromptBlock(identity=canonical_json([role, bare]), tokens=tokens, ttl=ttl)


def _content(message: Block) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _listed(value: Any) -> list[Block]:
    return [b for b in value if isinstance(b, dict)] if isinstance(value, list) else []


def _ttl(marker: Block) -> str:
    return str(marker.get("ttl") or "5m")


def _object(arguments: str) -> Block:
    """The Anthropic wire always carries an object; text that is not one becomes {}."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
