"""Tool-pair hygiene after a splice: every result has its call, every call has its result."""

from __future__ import annotations

from collections.abc import Sequence

from agent.messages import ChatMessage, tool_call_ids

__all__ = ["STUB_TOOL_RESULT", "find_orphans", "sanitize_tool_pairs"]

STUB_TOOL_RESULT = "[Tool result removed during context compaction]"


def sanitize_tool_pairs(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Drop results whose call is gone (or answered already); add a stub for calls left unanswered.

    A result counts only if it follows its assistant message within that message's run of tool
    results. Stubs go right after the run, in call order. Untouched messages stay the same objects.
    """
    out: list[ChatMessage] = []
    index = 0
    total = len(messages)
    while index < total:
        msg = messages[index]
        index += 1
        if msg.get("role") == "tool":
            continue  # a result with no assistant message directly before its run
        out.append(msg)
        pending = tool_call_ids(msg) if msg.get("role") == "assistant" else []
        if not pending:
            continue
        waiting = dict.fromkeys(pending)
        while index < total and messages[index].get("role") == "tool":
            result = messages[index]
            index += 1
            call_id = result.get("tool_call_id")
            if call_id in waiting:
                del waiting[call_id]
                out.append(result)
        names = {c["id"]: c["function"]["name"] for c in msg.get("tool_calls") or ()}
        out.extend(_stub(call_id, names.get(call_id, "")) for call_id in waiting)
    return out


def find_orphans(messages: Sequence[ChatMessage]) -> tuple[list[str], list[str]]:
    """(call ids without a result, result ids without a call), judged as `sanitize_tool_pairs` does."""
    unanswered: list[str] = []
    stray: list[str] = []
    waiting: dict[str, None] = {}
    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            call_id = msg.get("tool_call_id", "")
            if call_id in waiting:
                del waiting[call_id]
            else:
                stray.append(call_id)
            continue
        unanswered.extend(waiting)
        waiting = dict.fromkeys(tool_call_ids(msg)) if role == "assistant" else {}
    unanswered.extend(waiting)
    return unanswered, stray


def _stub(call_id: str, name: str) -> ChatMessage:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": STUB_TOOL_RESULT}
