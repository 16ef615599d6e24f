"""Pure renderers of a stored session: JSON Lines and Markdown. They add nothing that was not stored."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from state.values import ChatMessage, SessionInfo, content_text

__all__ = ["export_jsonl", "export_markdown", "message_record"]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def message_record(msg: ChatMessage) -> dict[str, Any]:
    """A stored message as a plain JSON object: metadata keys lose their underscore."""
    record: dict[str, Any] = {"id": msg.get("_id")}
    record.update({k: v for k, v in msg.items() if not k.startswith("_")})
    record["kind"] = msg.get("_kind", "normal")
    record["created_at"] = msg.get("_created_at")
    record["active"] = msg.get("_active", True)
    record["compacted"] = msg.get("_compacted", False)
    record["archived_by"] = msg.get("_archived_by")
    return record


def export_jsonl(info: SessionInfo, messages: list[ChatMessage]) -> str:
    """One `{"type": "session"}` line, then one `{"type": "message"}` line per row in order."""
    lines = [json.dumps({"type": "session", **asdict(info)}, ensure_ascii=False)]
    for msg in messages:
        lines.append(json.dumps({"type": "message", **message_record(msg)}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def export_markdown(info: SessionInfo, messages: list[ChatMessage]) -> str:
    """A readable transcript: session facts, then each message under a heading; archived rows marked."""
    out = [f"# Session {info.id}", ""]
    facts = {
        "platform": info.platform,
        "title": info.title,
        "model": info.model,
        "created": _iso(info.created_at),
        "parent session": info.parent_session_id,
        "ended": info.end_reason,
        "messages": f"{info.active_messages} active of {info.total_messages}",
    }
    out += [f"- **{k}**: {v}" for k, v in facts.items() if v is not None]
    for number, msg in enumerate(messages, start=1):
        out += ["", _heading(number, msg), ""]
        text = content_text(msg)
        if text:
            out.append(text)
        for call in msg.get("tool_calls") or ():
            fn = call.get("function") or {}
            out += [f"Tool call `{fn.get('name', '?')}` ({call.get('id', '')}):", ""]
            out += ["```json", str(fn.get("arguments", "")), "```"]
    return "\n".join(out).rstrip() + "\n"


def _heading(number: int, msg: ChatMessage) -> str:
    role = str(msg.get("role", "?"))
    if msg.get("name") and role == "tool":
        role = f"tool {msg['name']}"
    marks = []
    if msg.get("_kind") == "summary":
        marks.append("summary")
    if msg.get("_active") is False:
        reason = msg.get("_archived_by")
        marks.append(f"archived: {reason}" if isinstance(reason, str) else "archived")
    suffix = f" ({', '.join(marks)})" if marks else ""
    when = _iso(float(msg.get("_created_at") or 0.0))
    return f"## {number}. {role}{suffix} · {when} · #{msg.get('_id')}"
