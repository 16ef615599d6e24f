"""Wire payloads, request validation and cache accounting for FakeLLM: pure functions, no I/O."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CacheOutcome",
    "PromptBlock",
    "ReplyParts",
    "anthropic_events",
    "anthropic_message",
    "anthropic_prompt_blocks",
    "canonical_json",
    "openai_chunks",
    "openai_completion",
    "openai_prompt_blocks",
    "plan_anthropic_cache",
    "prefix_digests",
    "split_deltas",
    "tokens_of_text",
    "validate_anthropic",
    "validate_openai",
]

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS = 4
_OPENAI_MESSAGE_KEYS = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "refusal"}
)


def tokens_of_text(text: str) -> int:
    """The fake's tokenizer: ceil(chars / 4)."""
    return (len(text) + 3) // 4


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def split_deltas(text: str) -> list[str]:
    """Stream pieces: one word with its trailing whitespace each."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptBlock:
    """One cacheable unit of a prompt: its identity, its token count and its breakpoint TTL."""

    identity: str
    tokens: int
    ttl: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheOutcome:
    """How a request's prompt splits into read, written and uncached tokens."""

    input_tokens: int
    read_tokens: int = 0
    write_tokens_by_ttl: dict[str, int] = field(default_factory=dict)
    store: tuple[tuple[int, str], ...] = ()
    """(block index, ttl) of every prefix to (re)write with a fresh expiry."""
    hit_index: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyParts:
    """What the fake answers with, independent of the wire format."""

    text: str
    tool_calls: Sequence[tuple[str, str, str]] = ()
    """(id, name, arguments JSON text)."""
    stop: str = "end"
    """end | tool_use | max_tokens"""


def anthropic_prompt_blocks(body: dict[str, Any]) -> list[PromptBlock]:
    """tools -> system -> messages, one block each; a top-level marker marks the last block."""
    blocks: list[PromptBlock] = []
    for tool in body.get("tools") or ():
        blocks.append(_block("tool", tool))
    system = body.get("system")
    if isinstance(system, str) and system:
        blocks.append(_block("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks.extend(_block("system", b) for b in system)
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks.extend(_block(message.get("role", ""), b) for b in content or ())
    top = body.get("cache_control")
    if isinstance(top, dict) and blocks:
        last = blocks[-1]
        blocks[-1] = PromptBlock(identity=last.identity, tokens=last.tokens, ttl=_ttl(top))
    return blocks


def openai_prompt_blocks(body: dict[str, Any]) -> list[PromptBlock]:
    """tools, then one block per message (OpenAI caches message prefixes automatically)."""
    blocks = [_block("tool", t) for t in body.get("tools") or ()]
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list):
            text = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        else:
            text = content if isinstance(content, str) else ""
        extra = {k: v for k, v in message.items() if k not in ("content", "role")}
        identity = canonical_json({"role": message.get("role"), "text": text, **extra})
        tokens = tokens_of_text(text) + (tokens_of_text(canonical_json(extra)) if extra else 0)
        blocks.append(PromptBlock(identity=identity, tokens=tokens))
    return blocks


def prefix_digests(blocks: Sequence[PromptBlock], salt: str) -> list[str]:
    """digests[i] identifies blocks[: i + 1] under `salt` (model and key)."""
    digests: list[str] = []
    current = hashlib.sha256(salt.encode()).hexdigest()
    for block in blocks:
        current = hashlib.sha256((current + block.identity).encode()).hexdigest()
        digests.append(current)
    return digests


def plan_anthropic_cache(
    blocks: Sequence[PromptBlock], is_live: Callable[[int], bool], *, min_cache_tokens: int
) -> CacheOutcome:
    """Read the longest live prefix up to the last breakpoint, write the rest up to it."""
    cumulative: list[int] = []
    total = 0
    for block in blocks:
        total += block.tokens
        cumulative.append(total)
    breakpoints = [
        i
        for i, b in enumerate(blocks)
        if b.ttl is not None and cumulative[i] >= max(min_cache_tokens, 1)
    ]
    if not breakpoints:
        return CacheOutcome(input_tokens=total)
    last = breakpoints[-1]
    hit = next((i for i in range(last, -1, -1) if is_live(i)), None)
    read = cumulative[hit] if hit is not None else 0
    written: dict[str, int] = {}
    start = read
    for index in breakpoints:
        if hit is not None and index <= hit:
            continue
        ttl = blocks[index].ttl or "5m"
        written[ttl] = written.get(ttl, 0) + cumulative[index] - start
        start = cumulative[index]
    store = tuple((i, blocks[i].ttl or "5m") for i in breakpoints)
    return CacheOutcome(
        input_tokens=total - cumulative[last],
        read_tokens=read,
        write_tokens_by_ttl=written,
        store=store,
        hit_index=hit,
    )


def validate_anthropic(body: dict[str, Any]) -> str | None:
    """The first reason the real Messages API would answer 400, or None."""
    if not isinstance(body.get("model"), str) or not isinstance(body.get("max_tokens"), int):
        return "model: Field required; max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    markers: list[dict[str, Any]] = []
    for block in _system_blocks(body):
        if block.get("type") == "text" and not block.get("text"):
            return "system: text content blocks must be non-empty"
        markers += [block["cache_control"]] if "cache_control" in block else []
    markers += [t["cache_control"] for t in body.get("tools") or () if "cache_control" in t]
    pending: set[str] = set()
    for index, message in enumerate(messages):
        problem = _check_anthropic_message(index, message, pending, markers)
        if problem:
            return problem
    if pending:
        return f"messages: tool_use ids were found without tool_result blocks: {sorted(pending)}"
    return _check_markers(markers + ([body["cache_control"]] if "cache_control" in body else []))


def validate_openai(body: dict[str, Any]) -> str | None:
    """The first reason the real Chat Completions API would answer 400, or None."""
    messages = body.get("messages")
    if not isinstance(body.get("model"), str) or not isinstance(messages, list) or not messages:
        return "you must provide a model parameter and a non-empty messages array"
    pending: set[str] = set()
    for index, message in enumerate(messages):
        unknown = set(message) - _OPENAI_MESSAGE_KEYS
        if unknown:
            return f"messages[{index}]: Additional properties are not allowed ({sorted(unknown)})"
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return (
                    f"messages[{index}]: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id': {sorted(pending)}"
            )
        if role == "assistant":
            pending = {c["id"] for c in message.get("tool_calls") or ()}
    return None


def anthropic_message(
    *, message_id: str, model: str, reply: ReplyParts, usage: dict[str, Any]
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call_id, name, arguments in reply.tool_calls:
        content.append(
            {"type": "tool_use", "id": call_id, "name": name, "input": _object(arguments)}
        )
    stop = {"end": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}[reply.stop]
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def anthropic_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The exact SSE event sequence for `message`: start, ping, blocks, delta, stop."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        events.extend(_block_events(index, block))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def openai_completion(
    *, completion_id: str, model: str, created: int, reply: ReplyParts, usage: dict[str, Any]
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in reply.tool_calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": _finish(reply), "logprobs": None}
        ],
        "usage": usage,
    }


def openai_chunks(
    *, completion_id: str, model: str, created: int, reply: ReplyParts, usage: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Role chunk, text deltas, tool-call deltas by index, finish chunk, then the usage chunk."""
    base = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
    }
    with_usage = {"usage": None} if usage is not None else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**base, "choices": [choice], **with_usage}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in split_deltas(reply.text)]
    for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
        head = {"index": index, "id": call_id, "type": "function"}
        chunks.append(
            chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        )
        for piece in _fragments(arguments):
            chunks.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    chunks.append(chunk({}, _finish(reply)))
    if usage is not None:
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


def _block(role: str, block: dict[str, Any]) -> PromptBlock:
    bare = {k: v for k, v in block.items() if k != "cache_control"}
    if bare.get("type") == "text" and set(bare) <= {"type", "text"}:
        tokens = tokens_of_text(str(bare.get("text", "")))
    else:
        tokens = tokens_of_text(canonical_json(bare))
    marker = block.get("cache_control")
    ttl = _ttl(marker) if isinstance(marker, dict) else None
    return PromptBlock(identity=canonical_json([role, bare]), tokens=tokens, ttl=ttl)


def _ttl(marker: dict[str, Any]) -> str:
    return str(marker.get("ttl") or "5m")


def _system_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    system = body.get("system")
    return [b for b in system if isinstance(b, dict)] if isinstance(system, list) else []


def _check_anthropic_message(
    index: int, message: dict[str, Any], pending: set[str], markers: list[dict[str, Any]]
) -> str | None:
    role, content = message.get("role"), message.get("content")
    if role not in ("user", "assistant"):
        return f"messages.{index}.role: Input should be 'user' or 'assistant'"
    if isinstance(content, str):
        return None if content else f"messages.{index}: text content blocks must be non-empty"
    if not isinstance(content, list) or not content:
        return f"messages.{index}: all messages must have non-empty content"
    answered = {b.get("tool_use_id") for b in content if b.get("type") == "tool_result"}
    if pending and (role != "user" or not pending <= answered):
        return f"messages.{index}: tool_use ids were found without tool_result blocks immediately after"
    if role == "user" and answered - pending:
        return f"messages.{index}: unexpected tool_use_id found in tool_result blocks"
    pending.clear()
    for block in content:
        if block.get("type") == "text" and not block.get("text"):
            return f"messages.{index}: text content blocks must be non-empty"
        if block.get("type") == "tool_use":
            pending.add(block.get("id"))
        if "cache_control" in block:
            markers.append(block["cache_control"])
    return None


def _check_markers(markers: list[dict[str, Any]]) -> str | None:
    if len(markers) > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(markers)}."
        )
    seen_5m = False
    for marker in markers:
        if marker.get("type") != "ephemeral" or _ttl(marker) not in TTL_SECONDS:
            return f"cache_control: invalid marker {marker!r}"
        if _ttl(marker) == "1h" and seen_5m:
            return "a ttl='1h' cache_control block must not come after a ttl='5m' block"
        seen_5m = seen_5m or _ttl(marker) == "5m"
    return None


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    start: dict[str, Any]
    if block["type"] == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in split_deltas(block["text"])]
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        text = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _fragments(text)]
    events = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _fragments(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _finish(reply: ReplyParts) -> str:
    return {"end": "stop", "tool_use": "tool_calls", "max_tokens": "length"}[reply.stop]


def _object(arguments: str) -> dict[str, Any]:
    """The Anthropic wire always carries an object; text that is not one becomes {}."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
