"""A deterministic summary built from the middle itself, used when the summary model misbehaves.

Never a content-free placeholder: it lists the user's requests, files touched, commands run,
errors seen, decisions and open items, and carries the previous summary forward. Each request,
command, error and decision cites the row it came from (`[#1203]`), so `recall` can bring the
original back. Secrets are replaced with [REDACTED] by `agent.redaction`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.compaction.markers import is_marker
from agent.media.refs import describe, media_of
from agent.messages import ChatMessage, content_text
from agent.redaction import redact_text

__all__ = ["LocalFacts", "build_local_summary", "extract_facts"]

_PATH_KEYS = ("path", "file", "file_path", "filename", "filepath", "target", "source", "dest")
_COMMAND_KEYS = ("command", "cmd", "script")
_PATH_RE = re.compile(
    r"(?<![\w@])(?:[\w.-]+/)*[\w-]+\.(?:py|pyi|js|ts|tsx|jsx|md|json|ya?ml|toml|txt|sh|go|rs|java"
    r"|c|h|cpp|hpp|html|css|sql|ini|cfg|lock|rb|php|kt|swift)\b"
)
_ERROR_RE = re.compile(r"error|exception|traceback|failed|fatal|denied|not found", re.IGNORECASE)
_DECISION_RE = re.compile(
    r"\b(decided|decide|will use|instead|chose|choose|going to|switch(?:ed)? to|plan is)\b",
    re.IGNORECASE,
)
_OPEN_RE = re.compile(r"\b(todo|next|remaining|still need|not yet|pending|follow[- ]up)\b", re.I)
_LIMITS = {"requests": 12, "files": 30, "commands": 20, "errors": 10, "decisions": 10, "open": 5}


@dataclass(slots=True)
class LocalFacts:
    requests: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    open_items: list[str] = field(default_factory=list)


def extract_facts(middle: Sequence[ChatMessage]) -> LocalFacts:
    """Walk the middle once and collect the facts the summary lists, oldest first."""
    facts = LocalFacts()
    for msg in middle:
        if is_marker(msg):
            continue
        role, text, cite = msg.get("role"), content_text(msg), _cite(msg)
        if role == "user":
            attached = "".join(f" [attached: {describe(ref)}]" for ref in media_of(msg))
            facts.requests.append(cite + _line(text, 300) + attached)
        elif role == "tool":
            match = _ERROR_RE.search(text)
            if match:
                facts.errors.append(cite + _line(_line_at(text, match.start()), 200))
        elif role == "assistant":
            _collect_calls(msg, facts, cite)
            facts.files.extend(_PATH_RE.findall(text))
            facts.decisions.extend(cite + d for d in _sentences(text, _DECISION_RE))
            facts.open_items.extend(_sentences(text, _OPEN_RE))
    last_reply = next(
        (
            content_text(m)
            for m in reversed(middle)
            if m.get("role") == "assistant" and content_text(m)
        ),
        "",
    )
    if last_reply and not facts.open_items:
        facts.open_items.append(_line(last_reply, 300))
    return facts


def build_local_summary(
    middle: Sequence[ChatMessage],
    *,
    previous_summary: str | None,
    failure: str,
    max_chars: int,
) -> str:
    """The structured summary text, within `max_chars`, secrets redacted."""
    facts = extract_facts(middle)
    sections = [
        f"(Built without the summary model ({failure}) from {len(middle)} earlier messages.)",
        "## Goal\n" + _bullets(facts.requests, "requests", "User requests, oldest first"),
        "## Constraints & Preferences\nSee the user requests under Goal.",
        "## Progress\n### Done\n" + _bullets(facts.commands, "commands", "Commands run"),
        "### In Progress\n" + _bullets(facts.open_items[-1:], "open"),
        "### Blocked\n" + _bullets(facts.errors[-3:], "errors"),
        "## Key Decisions\n" + _bullets(facts.decisions, "decisions"),
        "## Relevant Files\n" + _bullets(_unique(facts.files), "files"),
        "## Next Steps\n" + _bullets(facts.open_items, "open"),
        "## Critical Context\n" + _bullets(facts.errors, "errors", "Errors seen"),
    ]
    if previous_summary:
        sections.append("## Earlier Summary\n" + previous_summary.strip())
    text = redact_text("\n\n".join(sections))
    if len(text) > max_chars:
        text = text[: max(0, max_chars - 40)].rstrip() + "\n[... local summary truncated ...]"
    return text


def _cite(msg: ChatMessage) -> str:
    """`[#id] ` for a stored message (the anchor `recall` reads back), else nothing."""
    row_id = msg.get("_id")
    return f"[#{row_id}] " if isinstance(row_id, int) and not isinstance(row_id, bool) else ""


def _collect_calls(msg: ChatMessage, facts: LocalFacts, cite: str) -> None:
    for call in msg.get("tool_calls") or ():
        fn = call["function"]
        raw = fn.get("arguments") or ""
        args = _loads(raw)
        for key in _COMMAND_KEYS:
            if isinstance(args.get(key), str):
                facts.commands.append(cite + _line(args[key], 200))
        for key in _PATH_KEYS:
            if isinstance(args.get(key), str):
                facts.files.append(args[key][:200])
        facts.files.extend(_PATH_RE.findall(raw))
        if not any(isinstance(args.get(k), str) for k in _COMMAND_KEYS):
            facts.commands.append(f"{cite}{fn['name']}({_line(raw, 120)})")


def _loads(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _sentences(text: str, pattern: re.Pattern[str]) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [_line(p, 200) for p in parts if p.strip() and pattern.search(p)]


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)]


def _line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _bullets(items: list[str], kind: str, title: str = "") -> str:
    limit = _LIMITS[kind]
    shown = items[-limit:]
    if not shown:
        return "None recorded."
    head = f"{title}:\n" if title else ""
    more = f"\n- ({len(items) - len(shown)} earlier omitted)" if len(items) > len(shown) else ""
    return head + "\n".join(f"- {item}" for item in shown) + more
