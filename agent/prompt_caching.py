"""Anthropic prompt caching: `system_and_3` breakpoints and the on/off decision, as pure functions.

Anthropic allows at most four ``cache_control`` breakpoints per request. The ``system_and_3``
strategy spends one on the system prompt (stable across every turn) and three on the last three
non-system messages (a rolling window, so each turn reads the prefix the previous turn wrote).

Placement on a deep copy of the canonical messages (see `agent.messages`):

- string content becomes a one-block list ``[{"type": "text", "text": ..., "cache_control": m}]``;
- list content gets the marker on its last non-empty block;
- tool results and assistant tool-call messages get the message-level key ``cache_control``;
  providers move it onto the last block they emit for that message (the ``tool_result`` block or
  the last ``tool_use`` block), so the cached prefix covers the whole message;
- empty content (``None``, ``""``, ``[]`` or only empty text) never carries a marker; such a
  message without tool calls is skipped and the breakpoint goes to the next earlier message.

Markers already present in the input are dropped from the copy, so the result never holds more
than four, whatever the caller passed in.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from agent.errors import ConfigError
from agent.messages import ChatMessage

__all__ = [
    "MAX_BREAKPOINTS",
    "CacheTtl",
    "CachingDecision",
    "apply_anthropic_cache_control",
    "cache_marker",
    "caching_decision",
    "cold_cache_warning",
    "count_cache_markers",
]

CacheTtl: TypeAlias = Literal["5m", "1h"]

MAX_BREAKPOINTS = 4
"""Anthropic rejects a request with more than four cache_control breakpoints."""
ROLLING_WINDOW = MAX_BREAKPOINTS - 1
"""Breakpoints on the newest non-system messages; the first one is the system prompt's."""
CACHE_TTLS: tuple[str, ...] = ("5m", "1h")
STATUS_PREFIX = "💾 Prompt caching:"

_ROUTE_LABELS = {"anthropic": "Anthropic", "openrouter": "OpenRouter"}


@dataclass(frozen=True, slots=True, kw_only=True)
class CachingDecision:
    """Whether requests for this model and route carry cache breakpoints, and why."""

    enabled: bool
    ttl: CacheTtl
    reason: str
    """Why: ``"Claude via OpenRouter"`` when on, else what turned it off."""
    status_line: str
    """The start-up line the terminal shows, e.g. ``💾 Prompt caching: off (disabled in config)``."""


def cache_marker(ttl: str = "5m") -> dict[str, str]:
    """The wire form of one breakpoint; the 5m TTL is Anthropic's default and is left implicit."""
    if ttl == "5m":
        return {"type": "ephemeral"}
    if ttl == "1h":
        return {"type": "ephemeral", "ttl": "1h"}
    raise ValueError(f"cache ttl must be one of {CACHE_TTLS}, not {ttl!r}")


def apply_anthropic_cache_control(
    messages: Sequence[ChatMessage], ttl: str = "5m", *, blocks_only: bool = False
) -> list[ChatMessage]:
    """A deep copy of `messages` with `system_and_3` breakpoints; the input is never mutated.

    `blocks_only` is for the OpenAI wire (OpenRouter): there an assistant tool-call message
    without text has no content block to carry a marker, so the breakpoint moves to the next
    earlier message instead of being lost.
    """
    marker = cache_marker(ttl)
    out: list[ChatMessage] = [_without_markers(copy.deepcopy(m)) for m in messages]
    for index in _breakpoint_indexes(out, blocks_only=blocks_only):
        _place_marker(out[index], marker)
    return out


def count_cache_markers(messages: Sequence[ChatMessage]) -> int:
    """How many breakpoints `messages` carry, message-level keys and content blocks together."""
    total = 0
    for msg in messages:
        total += "cache_control" in msg
        content = msg.get("content")
        if isinstance(content, list):
            total += sum(1 for b in content if isinstance(b, dict) and "cache_control" in b)
    return total


def caching_decision(
    model: str, provider: str, base_url: str | None, *, enabled: bool, ttl: str
) -> CachingDecision:
    """On only for Claude models on routes that accept cache_control (Anthropic, OpenRouter)."""
    if ttl not in CACHE_TTLS:
        raise ConfigError(
            f"prompt_caching.cache_ttl must be one of {CACHE_TTLS}, not {ttl!r}",
            key="prompt_caching.cache_ttl",
        )
    checked_ttl: CacheTtl = "1h" if ttl == "1h" else "5m"
    route = _cache_route(provider, base_url)
    if not enabled:
        return _off(checked_ttl, "disabled in config")
    if "claude" not in model.lower():
        return _off(checked_ttl, f"model {model} is not a Claude model")
    if route is None:
        return _off(checked_ttl, f"route {provider} does not accept cache_control")
    reason = f"Claude via {_ROUTE_LABELS[route]}"
    return CachingDecision(
        enabled=True,
        ttl=checked_ttl,
        reason=reason,
        status_line=f"{STATUS_PREFIX} ENABLED ({reason}, {checked_ttl} TTL)",
    )


def cold_cache_warning(old_model: str, new_model: str) -> str | None:
    """The notice a mid-session model switch owes the user; None when the model is unchanged."""
    if old_model == new_model:
        return None
    return (
        f"Switched model {old_model} -> {new_model}: the prompt cache starts cold, so the next "
        "request re-reads the whole conversation at the full input price."
    )


def _off(ttl: CacheTtl, reason: str) -> CachingDecision:
    return CachingDecision(
        enabled=False, ttl=ttl, reason=reason, status_line=f"{STATUS_PREFIX} off ({reason})"
    )


def _cache_route(provider: str, base_url: str | None) -> Literal["anthropic", "openrouter"] | None:
    """The route name when it accepts cache_control: native Anthropic, or OpenRouter."""
    if provider == "anthropic":
        return "anthropic"
    if provider == "openrouter":
        return "openrouter"
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return "openrouter"
    return None


def _breakpoint_indexes(messages: Sequence[ChatMessage], *, blocks_only: bool) -> list[int]:
    """Indexes that get a marker: the first system message, then the last three eligible others."""
    chosen: list[int] = []
    system = next((i for i, m in enumerate(messages) if m.get("role") == "system"), None)
    if system is not None and _can_carry_marker(messages[system]):
        chosen.append(system)
    window: list[int] = []
    for index in range(len(messages) - 1, -1, -1):
        if len(window) == ROLLING_WINDOW:
            break
        msg = messages[index]
        if msg.get("role") != "system" and _can_carry_marker(msg, blocks_only=blocks_only):
            window.append(index)
    return chosen + sorted(window)


def _can_carry_marker(msg: ChatMessage, *, blocks_only: bool = False) -> bool:
    content = msg.get("content")
    has_text = (isinstance(content, str) and bool(content)) or (
        _last_nonempty_block(content) is not None
    )
    if blocks_only and msg.get("role") == "assistant" and msg.get("tool_calls"):
        return has_text
    return _uses_message_level_key(msg) or has_text


def _uses_message_level_key(msg: ChatMessage) -> bool:
    """Tool results and tool-call messages: the provider puts the marker on the block it emits."""
    return msg.get("role") == "tool" or bool(msg.get("tool_calls"))


def _place_marker(msg: ChatMessage, marker: dict[str, str]) -> None:
    if _uses_message_level_key(msg):
        msg["cache_control"] = dict(marker)
        return
    content = msg.get("content")
    if isinstance(content, str):
        msg["content"] = [{"type": "text", "text": content, "cache_control": dict(marker)}]
        return
    block = _last_nonempty_block(content)
    if block is not None:
        block["cache_control"] = dict(marker)


def _last_nonempty_block(content: object) -> dict[str, Any] | None:
    """The block of list content a marker goes on; None when there is no non-empty block."""
    if not isinstance(content, list):
        return None
    for block in reversed(content):
        if isinstance(block, dict) and not _is_empty_block(block):
            return block
    return None


def _is_empty_block(block: dict[str, Any]) -> bool:
    return block.get("type", "text") == "text" and not block.get("text")


def _without_markers(msg: ChatMessage) -> ChatMessage:
    """Drop breakpoints an earlier pass left, so only this pass's markers reach the wire."""
    msg.pop("cache_control", None)
    content = msg.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                block.pop("cache_control", None)
    return msg
