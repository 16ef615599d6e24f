"""One step of a turn, decided purely: what a model reply means next, and the next request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from agent.messages import ChatMessage, ToolCall
from agent.providers.base import ProviderReply, ProviderRequest, ToolSpec

__all__ = ["CallTools", "Finish", "NextStep", "build_request", "decide", "unpersisted"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """The model answered; the turn is over."""

    message: ChatMessage
    truncated: bool = False
    """The answer hit the output limit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallTools:
    """The model asked for tools; run them and call the model again."""

    message: ChatMessage
    calls: tuple[ToolCall, ...]


NextStep: TypeAlias = Finish | CallTools


def decide(reply: ProviderReply) -> NextStep:
    """Tool calls win over the stop reason: some providers say "end" while still asking for tools."""
    calls = tuple(reply.message.get("tool_calls") or ())
    if calls:
        return CallTools(message=reply.message, calls=calls)
    return Finish(message=reply.message, truncated=reply.stop_reason == "max_tokens")


def build_request(
    transcript: Sequence[ChatMessage],
    *,
    model: str,
    tools: tuple[ToolSpec, ...],
    max_tokens: int,
    cache_ttl: str | None,
    cache_blocks_only: bool = False,
) -> ProviderRequest:
    """The request for the next model call; cache breakpoints only when caching is on."""
    messages = list(transcript)
    if cache_ttl is not None:
        from agent.prompt_caching import apply_anthropic_cache_control

        messages = apply_anthropic_cache_control(
            messages, ttl=cache_ttl, blocks_only=cache_blocks_only
        )
    return ProviderRequest(model=model, messages=messages, tools=tools, max_tokens=max_tokens)


def unpersisted(transcript: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Messages the store does not hold yet, in order."""
    return [m for m in transcript if not m.get("_persisted")]
