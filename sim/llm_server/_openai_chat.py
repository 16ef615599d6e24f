"""The OpenAI Chat Completions wire of the fake: request checks, cached-prefix usage, JSON and SSE.

Contract (https://platform.openai.com/docs/api-reference/chat/create and .../chat-streaming):
`model` and a non-empty `messages` list are required; a message carries only the documented
keys, its role is one of the six the API knows, and an assistant message with `tool_calls` is
followed by one `tool` message per call id. `stream_options` is only allowed with `stream`.
Streams are `data:` lines ending in `data: [DONE]`; tool calls stream by index; usage comes only
with `stream_options.include_usage`, as a last chunk with no choices. Caching is automatic and
`prompt_tokens_details.cached_tokens` is part of `prompt_tokens`.
"""

from __future__ import annotations

import math
import time
from typing import Any

from sim.llm_server._http import (
    fragments,
    invalid_request,
    missing_parameter,
    split_deltas,
    sse_frame,
)
from sim.llm_server._images import billed_image_tokens
from sim.llm_server._prompt import (
    PrefixCache,
    PromptBlock,
    canonical_json,
    last_user_text,
    tokens_of_text,
)
from sim.llm_server._values import Answer, Api, ErrorReply, Exchange, Family, ReplyParts

__all__ = ["ChatWire", "openai_prompt_blocks", "validate_openai"]

_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal"})
_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
_FINISH = {"end": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
Json = dict[str, Any]


class ChatWire:
    """POST /v1/chat/completions, with the automatic prefix cache scoped by model and key."""

    api: Api = "openai"
    family: Family = "openai"
    call_prefix = "call"

    def __init__(self, *, token_scale: float = 1.0) -> None:
        self._cache = PrefixCache()
        self.token_scale = token_scale
        """The server's tokenizer against the chars/4 one: 1.06 counts 6% more (a real
        tokenizer differs from any estimate; the runtime must calibrate to it)."""

    def refuse(self, body: Json, exchange: Exchange) -> ErrorReply | None:
        return validate_openai(body)

    def user_text(self, body: Json) -> str:
        return last_user_text(body["messages"])

    def prompt_tokens(self, body: Json) -> int:
        return math.ceil(sum(b.tokens for b in openai_prompt_blocks(body)) * self.token_scale)

    def answer(self, body: Json, reply: ReplyParts, exchange: Exchange) -> Answer:
        blocks = openai_prompt_blocks(body)
        cached = self._cache.cached_tokens(
            blocks, salt=canonical_json([body["model"], exchange.key])
        )
        prompt = math.ceil(sum(b.tokens for b in blocks) * self.token_scale)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": reply.output_tokens,
            "total_tokens": prompt + reply.output_tokens,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
        head = {
            "id": f"chatcmpl-fake{exchange.new_id():04d}",
            "created": int(time.time()),
            "model": body["model"],
        }
        if not body.get("stream"):
            return Answer(usage=usage, json=_completion(head, reply, usage))
        include = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = _chunks(head, reply, usage if include else None)
        frames = [sse_frame(chunk) for chunk in chunks] + [sse_frame("[DONE]")]
        return Answer(usage=usage, frames=frames)


def openai_prompt_blocks(body: Json) -> list[PromptBlock]:
    """tools, then one block per message (OpenAI caches message prefixes automatically)."""
    blocks = [_tool_block(t) for t in body.get("tools") or ()]
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            text = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        else:
            text = content if isinstance(content, str) else ""
        extra = {k: v for k, v in message.items() if k not in ("content", "role")}
        identity = canonical_json({"role": message.get("role"), "text": text, **extra})
        tokens = tokens_of_text(text) + (tokens_of_text(canonical_json(extra)) if extra else 0)
        if isinstance(content, list):  # images are billed by tiles, not by their base64 text
            images = [b for b in content if isinstance(b, dict) and b.get("type") == "image_url"]
            tokens += sum(
                billed_image_tokens(str(b["image_url"].get("url") or ""), rule="openai")
                for b in images
            )
            identity += canonical_json(images) if images else ""
        blocks.append(PromptBlock(identity=identity, tokens=tokens))
    return blocks


def validate_openai(body: Json) -> ErrorReply | None:
    """The first reason the real Chat Completions API would answer 400, or None."""
    messages = body.get("messages")
    if not isinstance(body.get("model"), str) or not isinstance(messages, list) or not messages:
        return invalid_request("you must provide a model parameter and a non-empty messages array")
    if "stream_options" in body and not body.get("stream"):
        return invalid_request(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            param="stream_options",
        )
    problem = _check_tools(body.get("tools"))
    pending: set[str] = set()
    for index, message in enumerate(messages):
        if problem is not None:
            break
        problem = _check_message(index, message, pending)
    return problem


def _check_tools(tools: Any) -> ErrorReply | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return invalid_request(
            f"Invalid type for 'tools': expected an array, but got {_kind(tools)}."
        )
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return missing_parameter(f"tools[{index}].function")
    return None


def _check_message(index: int, message: Any, pending: set[str]) -> ErrorReply | None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        return invalid_request(f"Invalid type for '{where}': expected an object.", param=where)
    unknown = set(message) - _MESSAGE_KEYS
    if unknown:
        return invalid_request(
            f"{where}: Additional properties are not allowed ({sorted(unknown)})"
        )
    role = message.get("role")
    if role not in _ROLES:
        supported = ", ".join(repr(r) for r in _ROLES)
        return invalid_request(
            f"Invalid value: {role!r}. Supported values are: {supported}.",
            param=f"{where}.role",
            code="invalid_value",
        )
    problem = _check_content(where, message.get("content"))
    if problem:
        return problem
    if role == "tool":
        if message.get("tool_call_id") not in pending:
            return invalid_request(
                f"{where}: messages with role 'tool' must be a response to a "
                "preceding message with 'tool_calls'"
            )
        pending.discard(message["tool_call_id"])
        return None
    if pending:
        return invalid_request(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id': {sorted(pending)}"
        )
    if role == "assistant":
        return _take_calls(where, message.get("tool_calls"), pending)
    return None


def _check_content(where: str, content: Any) -> ErrorReply | None:
    """Content is text, null, or a list of content-part objects."""
    if content is None or isinstance(content, str):
        return None
    if not isinstance(content, list):
        param = f"{where}.content"
        return invalid_request(
            f"Invalid type for '{param}': expected one of a string or array, "
            f"but got {_kind(content)} instead.",
            param=param,
        )
    for index, part in enumerate(content):
        param = f"{where}.content[{index}]"
        if not isinstance(part, dict):
            return invalid_request(
                f"Invalid type for '{param}': expected an object, but got {_kind(part)} instead.",
                param=param,
            )
        if part.get("type") == "image_url":  # {"image_url": {"url": "https://... | data:..."}}
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else None
            if not isinstance(url, str) or not url.startswith(
                ("https://", "http://", "data:image/")
            ):
                return invalid_request(
                    f"Invalid '{param}.image_url.url': expected a URL or a base64 data URL.",
                    param=f"{param}.image_url.url",
                )
    return None


def _take_calls(where: str, calls: Any, pending: set[str]) -> ErrorReply | None:
    """Check an assistant message's `tool_calls` and remember their ids as awaiting a result."""
    if calls is None:
        return None
    if not isinstance(calls, list):
        return invalid_request(f"Invalid type for '{where}.tool_calls': expected an array.")
    for index, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id:
            return missing_parameter(f"{where}.tool_calls[{index}].id")
        pending.add(call_id)
    return None


def _completion(head: Json, reply: ReplyParts, usage: Json) -> Json:
    message: Json = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in reply.tool_calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": _FINISH[reply.stop],
        "logprobs": None,
    }
    return {**head, "object": "chat.completion", "choices": [choice], "usage": usage}


def _chunks(head: Json, reply: ReplyParts, usage: Json | None) -> list[Json]:
    """Role chunk, text deltas, tool-call deltas by index, finish chunk, then the usage chunk."""
    base = {**head, "object": "chat.completion.chunk"}
    with_usage = {"usage": None} if usage is not None else {}

    def chunk(delta: Json, finish: str | None = None) -> Json:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**base, "choices": [choice], **with_usage}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in split_deltas(reply.text)]
    for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
        start = {"index": index, "id": call_id, "type": "function"}
        chunks.append(
            chunk({"tool_calls": [{**start, "function": {"name": name, "arguments": ""}}]})
        )
        for piece in fragments(arguments):
            chunks.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    chunks.append(chunk({}, _FINISH[reply.stop]))
    if usage is not None:
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


def _tool_block(tool: Json) -> PromptBlock:
    bare = {k: v for k, v in tool.items() if k != "cache_control"}
    return PromptBlock(
        identity=canonical_json(["tool", bare]), tokens=tokens_of_text(canonical_json(bare))
    )


def _kind(value: Any) -> str:
    names: dict[type, str] = {dict: "an object", str: "a string", int: "an integer"}
    return names.get(type(value), type(value).__name__)
