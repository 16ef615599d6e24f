"""A caller's own tools (the HTTP API's `tools`): which calls wait for the caller's results, and
how the caller's next messages join the transcript without breaking tool pairing.

When a turn offers the caller's tools, a model call to one ends the turn and the assistant
message with the calls is stored unanswered. The caller's next request either answers them
(`role: tool` messages, which continue the turn) or moves on with a new user message; then each
unanswered call gets a result saying so, so every call stays paired with a result before the
next user message (the invariant compaction and every provider rely on).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.errors import TurnRefused
from agent.messages import ChatMessage, ToolCall, content_text, tool_message

__all__ = ["NOT_ANSWERED_RESULT", "admit", "pending_calls"]

NOT_ANSWERED_RESULT = "[no result: the client went on without running this tool]"


def pending_calls(transcript: Sequence[ChatMessage]) -> tuple[ToolCall, ...]:
    """The calls of the trailing assistant message that have no result yet, in call order."""
    answered: set[str] = set()
    for message in reversed(transcript):
        role = message.get("role")
        if role == "tool":
            answered.add(str(message.get("tool_call_id") or ""))
            continue
        if role == "assistant" and message.get("tool_calls"):
            return tuple(c for c in message.get("tool_calls") or () if c["id"] not in answered)
        return ()
    return ()


def admit(transcript: Sequence[ChatMessage], said: Sequence[ChatMessage]) -> list[ChatMessage]:
    """What to append to `transcript` for the caller's new messages `said`, in order.

    A `tool` message must answer a call still waiting, in the transcript or in an assistant
    message of `said` (raises TurnRefused naming it otherwise); it is stored with the call's
    tool name. Calls still waiting when a message of
    another role arrives are closed first with `NOT_ANSWERED_RESULT`. When `said` is only tool
    results, every waiting call must be answered: the model is called next, and a call without
    a result is a request no provider accepts.
    """
    waiting = {call["id"]: call for call in pending_calls(transcript)}
    added: list[ChatMessage] = []
    for index, message in enumerate(said):
        if message.get("role") != "tool":
            added += _close(waiting)
            added.append(message)
            # A caller that sends history (stateless clients) sends calls and their results.
            waiting = {call["id"]: call for call in message.get("tool_calls") or ()}
            continue
        call_id = str(message.get("tool_call_id") or "")
        call = waiting.pop(call_id, None)
        if call is None:
            known = ", ".join(repr(k) for k in waiting) or "none"
            raise TurnRefused(
                f"tool_call_id {call_id!r} answers no tool call waiting for a result "
                f"(waiting: {known})",
                index=index,
                field="tool_call_id",
            )
        added.append(tool_message(call_id, call["function"]["name"], content_text(message)))
    if waiting and said:
        missing = ", ".join(repr(k) for k in waiting)
        raise TurnRefused(
            f"the assistant's tool calls {missing} have no result; send one role 'tool' message "
            "for each tool call",
            index=len(said) - 1,
        )
    return added


def _close(waiting: dict[str, ToolCall]) -> list[ChatMessage]:
    return [
        tool_message(call_id, call["function"]["name"], NOT_ANSWERED_RESULT)
        for call_id, call in waiting.items()
    ]
