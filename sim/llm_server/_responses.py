"""The OpenAI Responses wire of the fake (also the Codex backend's): checks, compaction, replies.

Contract (https://platform.openai.com/docs/api-reference/responses/create, .../responses-streaming
and https://platform.openai.com/docs/guides/conversation-state#compaction): `model` is
required; `input` items are typed (message, function_call, function_call_output, reasoning,
compaction); a `function_call_output` answers an earlier `function_call` unless a compaction
item stands in for the history before it. Encrypted items (reasoning, compaction) can only be
replayed to the issuer that created them; the fake binds them to the request's Host and refuses
them anywhere else. With `context_management` and an input over `compact_threshold` tokens the
server compacts: a compaction item comes first in the output. On top of the API, the fake holds
the runtime to its own contract: `store=false` and no `previous_response_id` (client-side replay).
"""

from __future__ import annotations

import time
from typing import Any

from sim.llm_server._http import invalid_request, missing_parameter, split_deltas, sse_frame
from sim.llm_server._prompt import PrefixCache, PromptBlock, canonical_json, tokens_of_text
from sim.llm_server._values import Answer, Api, ErrorReply, Exchange, Family, ReplyParts

__all__ = ["OPAQUE_ITEM_TOKENS", "ResponsesWire", "validate_responses"]

OPAQUE_ITEM_TOKENS = 50
"""What a replayed compaction or reasoning item counts as in the fake's input tokens."""
_ITEM_TYPES = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "compaction"}
)
_ROLES = frozenset({"user", "assistant", "developer", "system"})
Json = dict[str, Any]


class ResponsesWire:
    """POST {prefix}/responses (/v1, /backend-api/codex, relays); items bound to their Host."""

    api: Api = "responses"
    family: Family = "openai"
    call_prefix = "call"

    def __init__(self) -> None:
        self._issued: dict[str, set[str]] = {}
        self._cache = PrefixCache()

    def refuse(self, body: Json, exchange: Exchange) -> ErrorReply | None:
        problem = validate_responses(body) or self._foreign_item(body, exchange.host)
        if problem is not None:
            return problem
        if exchange.reject_context_management and "context_management" in body:
            return ErrorReply(
                status=400,
                type="invalid_request_error",
                message="Unsupported parameter: 'context_management' is not supported with this model.",
                param="context_management",
                code="unsupported_parameter",
            )
        return None

    def user_text(self, body: Json) -> str:
        for item in reversed(body["input"]):
            if item.get("type") == "message" and item.get("role") == "user":
                return _item_text(item)
        return ""

    def prompt_tokens(self, body: Json) -> int:
        return sum(b.tokens for b in _prompt_blocks(body))

    def answer(self, body: Json, reply: ReplyParts, exchange: Exchange) -> Answer:
        blocks = _prompt_blocks(body)
        salt = canonical_json([exchange.host, body["model"], exchange.key])
        cached = self._cache.cached_tokens(blocks, salt=salt)
        input_tokens = sum(b.tokens for b in blocks)
        output: list[Json] = []
        if reply.compaction or _crosses_threshold(body, input_tokens):
            output.append(self._opaque("compaction", exchange))
        if reply.reasoning:
            output.append(self._opaque("reasoning", exchange))
        if reply.text:
            output.append(_message_item(f"msg_{exchange.new_id():04d}", reply.text))
        output += [_call_item(*call) for call in reply.tool_calls]
        usage = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + reply.output_tokens,
        }
        response = _response(f"resp_{exchange.new_id():04d}", body, output, usage, reply)
        if not body.get("stream"):
            return Answer(usage=usage, json=response)
        return Answer(usage=usage, frames=[sse_frame(e, e["type"]) for e in _events(response)])

    def _foreign_item(self, body: Json, host: str) -> ErrorReply | None:
        issued = self._issued.get(host, set())
        for item in body["input"]:
            blob = item.get("encrypted_content")
            if blob is not None and (not isinstance(blob, str) or blob not in issued):
                message = f"encrypted content was not issued by {host}"
                return invalid_request(message, code="invalid_encrypted_content")
        return None

    def _opaque(self, kind: str, exchange: Exchange) -> Json:
        n = exchange.new_id()
        blob = f"enc-{kind}-{exchange.host}-{n}"
        self._issued.setdefault(exchange.host, set()).add(blob)
        item: Json = {"type": kind, "id": f"{kind[:3]}_{n:04d}", "encrypted_content": blob}
        if kind == "reasoning":
            item["summary"] = []
        return item


def validate_responses(body: Json) -> ErrorReply | None:
    """The API's required fields and item shapes, plus our contract (store=False, replay)."""
    if not isinstance(body.get("model"), str):
        return missing_parameter("model")
    if body.get("store") is not False:
        return invalid_request("fake: requests must set store=false", code="invalid_store")
    if "previous_response_id" in body:
        return invalid_request(
            "fake: previous_response_id must not be sent", code="invalid_previous_response"
        )
    if not isinstance(body.get("instructions"), str | None):
        return invalid_request(
            "Invalid type for 'instructions': expected a string.", param="instructions"
        )
    problem = _check_tools(body.get("tools")) or _check_context_management(body)
    if problem:
        return problem
    items = body.get("input")
    if not isinstance(items, list):
        return invalid_request("input must be a list of items", code="invalid_input")
    return _check_items(items)


def _check_items(items: list[Any]) -> ErrorReply | None:
    calls: set[str] = set()
    after_compaction = False
    for index, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in _ITEM_TYPES:
            return invalid_request(
                f"input[{index}]: unknown item type {kind!r}", code="invalid_input"
            )
        if kind == "compaction":
            after_compaction = True
        elif kind == "message" and item.get("role") not in _ROLES:
            return invalid_request(
                f"input[{index}]: bad role {item.get('role')!r}", code="invalid_input"
            )
        elif kind == "message" and not isinstance(item.get("content"), str | list):
            message = f"input[{index}]: content must be a string or a list of parts"
            return invalid_request(message, code="invalid_input")
        elif kind == "function_call":
            if not (
                _is_name(item.get("call_id"))
                and _is_name(item.get("name"))
                and isinstance(item.get("arguments"), str)
            ):
                message = f"input[{index}]: function_call needs call_id, name, arguments"
                return invalid_request(message, code="invalid_input")
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in calls and not after_compaction:
                message = f"input[{index}]: no function_call for {item.get('call_id')!r}"
                return invalid_request(message, code="invalid_input")
    return None


def _check_tools(tools: Any) -> ErrorReply | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return invalid_request("Invalid type for 'tools': expected an array.", param="tools")
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return invalid_request(f"Invalid type for 'tools[{index}]': expected an object.")
        if tool.get("type") == "function" and not isinstance(tool.get("name"), str):
            return missing_parameter(f"tools[{index}].name")
    return None


def _check_context_management(body: Json) -> ErrorReply | None:
    entries = body.get("context_management")
    if entries is None:
        return None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        return invalid_request(
            "Invalid type for 'context_management': expected an array of objects.",
            param="context_management",
        )
    for index, entry in enumerate(entries):
        threshold = entry.get("compact_threshold")
        if threshold is not None and (
            not isinstance(threshold, int) or isinstance(threshold, bool)
        ):
            param = f"context_management[{index}].compact_threshold"
            return invalid_request(f"Invalid type for '{param}': expected an integer.", param=param)
    return None


def _prompt_blocks(body: Json) -> list[PromptBlock]:
    """The instructions, then one block per input item: the unit of the automatic cache."""
    instructions = body.get("instructions")
    blocks = [
        PromptBlock(
            identity=canonical_json(instructions), tokens=tokens_of_text(instructions or "")
        )
    ]
    for item in body["input"]:
        blocks.append(PromptBlock(identity=canonical_json(item), tokens=_item_tokens(item)))
    return blocks


def _crosses_threshold(body: Json, input_tokens: int) -> bool:
    for entry in body.get("context_management") or ():
        threshold = entry.get("compact_threshold")
        if entry.get("type") == "compaction" and threshold is not None and input_tokens > threshold:
            return True
    return False


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _item_text(item: Json) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text") or "") for p in content or () if isinstance(p, dict))


def _item_tokens(item: Json) -> int:
    kind = item.get("type")
    if kind in ("compaction", "reasoning"):
        return OPAQUE_ITEM_TOKENS
    if kind == "message":
        return tokens_of_text(_item_text(item))
    if kind == "function_call":
        return tokens_of_text(item.get("name", "") + item.get("arguments", ""))
    return tokens_of_text(str(item.get("output") or ""))


def _message_item(item_id: str, text: str) -> Json:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _call_item(call_id: str, name: str, arguments: str) -> Json:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def _response(
    response_id: str, body: Json, output: list[Json], usage: Json, reply: ReplyParts
) -> Json:
    """A `Response` object; a max_tokens stop makes it incomplete (max_output_tokens)."""
    incomplete = reply.stop == "max_tokens"
    return {
        "id": response_id,
        "object": "response",
        "created_at": time.time(),
        "model": body["model"],
        "status": "incomplete" if incomplete else "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "store": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "usage": usage,
    }


def _events(response: Json) -> list[Json]:
    """created, in_progress, per item added/deltas/done, then completed (or incomplete)."""
    start = {
        **response,
        "status": "in_progress",
        "output": [],
        "usage": None,
        "incomplete_details": None,
    }
    events: list[Json] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            events += [
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                }
                for piece in split_deltas(item["content"][0]["text"])
            ]
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    last = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    events.append({"type": last, "response": response})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]
