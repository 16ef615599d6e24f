"""One step of a turn, decided purely: what a model reply means next, and the next request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from agent.compaction.markers import FOLDED_MARK, UNANSWERED_MARK, is_micro_marker
from agent.compaction.sanitize import sanitize_tool_pairs
from agent.messages import (
    ChatMessage,
    ToolCall,
    assistant_message,
    is_real_user_message,
    tool_call_ids,
    tool_message,
    user_message,
)
from agent.providers.base import ProviderReply, ProviderRequest, ToolSpec
from agent.providers.call_options import CallOptions
from agent.redaction import redact_message, redact_text
from state.values import storable, storable_text

__all__ = [
    "FOLDED_MARK",
    "INTERRUPTED_MARK",
    "INTERRUPTED_TOOL_RESULT",
    "FAILED_TOOL_RESULT",
    "UNANSWERED_MARK",
    "CallTools",
    "Finish",
    "NextStep",
    "build_request",
    "close_interrupted",
    "decide",
    "failed_mark",
    "incoming_messages",
    "is_unchanged",
    "unpersisted",
    "well_formed",
]

INTERRUPTED_MARK = "[interrupted by the user]"
"""Ends the assistant message of a turn the user stopped: the model knows it was cut off."""
INTERRUPTED_TOOL_RESULT = "[interrupted by the user: the tool was stopped before it finished]"
FAILED_TOOL_RESULT = "[not run: the turn failed before this tool could finish]"


def failed_mark(reason: str) -> str:
    """Ends the assistant message of a turn that failed after the user's words were stored,
    so the next request alternates roles and the model knows that message went unanswered."""
    return f"[no reply: this turn failed ({reason})]"


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
    call: CallOptions | None = None,
) -> ProviderRequest:
    """The request for the next model call; cache breakpoints only when caching is on. The
    caller's `max_tokens` (in `call`) is a ceiling it chose, honoured even below our minimum."""
    messages = well_formed(transcript)
    if cache_ttl is not None:
        from agent.prompt_caching import apply_anthropic_cache_control

        messages = apply_anthropic_cache_control(
            messages, ttl=cache_ttl, blocks_only=cache_blocks_only
        )
    call = call or CallOptions()
    return ProviderRequest(
        model=model,
        messages=messages,
        tools=tools,
        max_tokens=max_tokens if call.max_tokens is None else min(max_tokens, call.max_tokens),
        temperature=call.temperature,
        options=call,
    )


def unpersisted(transcript: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Messages the store does not hold yet, in order."""
    return [m for m in transcript if not m.get("_persisted")]


def close_interrupted(
    transcript: Sequence[ChatMessage],
    streamed: str,
    *,
    mark: str = INTERRUPTED_MARK,
    tool_result: str = INTERRUPTED_TOOL_RESULT,
) -> list[ChatMessage]:
    """What to append when a turn ends early (the user stopped it, or it failed: pass that
    `mark`), so the transcript stays well-formed: every tool call still open gets a result,
    and the turn ends with an assistant message holding what had `streamed` of the reply
    being written, then `mark`. Nothing when the turn had already ended with the model's
    answer (or never started)."""
    if not transcript:
        return []
    last = transcript[-1]
    role = last.get("role")
    if role == "assistant" and not last.get("tool_calls"):
        return []  # the answer was complete; only the bookkeeping after it was cut
    if role not in ("user", "assistant", "tool"):
        return []  # the user's message never joined the transcript: nothing to close
    added: list[ChatMessage] = []
    answered = {m.get("tool_call_id") for m in transcript if m.get("role") == "tool"}
    for message in reversed(transcript):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            added += [
                tool_message(call_id, _tool_name(message, call_id), tool_result)
                for call_id in tool_call_ids(message)
                if call_id not in answered
            ]
            break
        if message.get("role") != "tool":
            break
    text = f"{streamed.rstrip()}\n\n{mark}" if streamed.strip() else mark
    return [*added, assistant_message(text)]


def _tool_name(message: ChatMessage, call_id: str) -> str:
    for call in message.get("tool_calls") or ():
        if call["id"] == call_id:
            return call["function"]["name"]
    return ""


def well_formed(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """`messages` as every provider accepts them: every tool call answered and every result
    after its call (`sanitize_tool_pairs`), and no two user messages in a row. Before the
    rolling marker the reply between them was folded into its summary (`FOLDED_MARK` says
    so); anywhere else a stored turn's reply was lost (a killed worker, a failing store) and
    gets `UNANSWERED_MARK`, so each message keeps its place and the model is told the truth.
    Untouched messages stay the same objects; the transcript itself is not changed."""
    sane = sanitize_tool_pairs(messages)
    folded_before = _newest_micro_marker(sane)
    out: list[ChatMessage] = []
    for index, message in enumerate(sane):
        if out and is_real_user_message(message) and is_real_user_message(out[-1]):
            mark = FOLDED_MARK if index < folded_before else UNANSWERED_MARK
            out.append({"role": "assistant", "content": mark})
        out.append(message)
    return out


def _newest_micro_marker(messages: Sequence[ChatMessage]) -> int:
    """Index of the rolling marker (at most one is kept), or -1."""
    for index in range(len(messages) - 1, -1, -1):
        if is_micro_marker(messages[index]):
            return index
    return -1


def incoming_messages(said: str | Sequence[ChatMessage]) -> list[ChatMessage]:
    """A turn's new messages as the store keeps them: redacted, storable text."""
    if isinstance(said, str):
        return [user_message(storable_text(redact_text(said)))]
    return [storable(redact_message(dict(m))) for m in said]


def is_unchanged(new: list[ChatMessage], old: list[ChatMessage]) -> bool:
    """The very same message objects: an engine that compacted elsewhere changed nothing here."""
    return len(new) == len(old) and all(a is b for a, b in zip(new, old, strict=True))
