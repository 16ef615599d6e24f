"""The scripted model: plays a `ScriptedTurn` plan step by step, and writes summaries on request.

`SimModel` is a `FakeLLM` responder. For the agent's calls it finds the turn by the ticket tag of
the newest real user message and counts the tool results since then to know which round comes
next. Summarization requests (the compressor's and micro-compaction's prompts: no tools, a system
prompt about summaries) get a structured summary built from the input, whose size follows the
input: a rolling summary is carried nearly whole, new material adds about a tenth of its size, a
request to condense shrinks it, and the result always fits the request's `max_tokens`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sim.conversation import ScriptedTurn, turn_index_of
from sim.llm_server import ToolCallSpec, Turn, tokens_of_text

__all__ = ["CallKind", "SimModel", "is_summary_request", "plan_summary_tokens", "write_summary"]

CallKind = Literal["agent", "summary"]
CARRY_RATIO = 0.92
"""Share of an existing summary an update keeps (it drops what became obsolete)."""
NEW_MATERIAL_RATIO = 0.10
"""Tokens of summary per token of new material."""
CONDENSE_RATIO = 0.55
"""What a "condense / re-summarize" request keeps of the existing summary."""
FIT_RATIO = 0.85
"""Summaries stay under this share of the request's max_tokens."""
MIN_SUMMARY_TOKENS = 150
_PREVIOUS_RE = re.compile(
    r"<(previous-summary|running-summary|existing-summary|current-summary|rolling-summary)>"
    r"(.*?)</\1>",
    re.DOTALL,
)
_CONDENSE_WORDS = ("baggy", "one compact summary", "condense", "defrag", "clearly shorter")
_BUDGET_RE = re.compile(r"at most about (\d+) tokens")
BUDGET_OVERSHOOT = 1.05
"""Like a real model, the sim lands near a stated budget, sometimes a little over it."""
_PATH_RE = re.compile(r"\b(?:src|tests|docs)/[\w/.-]+\.(?:py|md|toml)\b")
_TAG_RE = re.compile(r"\bHRM-\d{4,}\b")
_RESULT_RE = re.compile(r"\b\d+ passed, \d+ failed\b")
_ERROR_RE = re.compile(r"AssertionError: [^\n]{0,80}")


@dataclass(slots=True)
class SimModel:
    """The responder: `FakeLLM(responder=SimModel(turns))`. Records the kind of every call."""

    turns: Sequence[ScriptedTurn]
    calls: list[CallKind] = field(default_factory=list)
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0

    def __call__(self, body: dict[str, Any], api: str) -> Turn:
        if is_summary_request(body):
            self.calls.append("summary")
            prompt = _all_text(body)
            text = write_summary(prompt, max_tokens=int(body.get("max_tokens") or 4096))
            self.summary_input_tokens += tokens_of_text(prompt)
            self.summary_output_tokens += tokens_of_text(text)
            return Turn(text=text)
        self.calls.append("agent")
        return self._agent_turn(body, api)

    def _agent_turn(self, body: dict[str, Any], api: str) -> Turn:
        user_text, done = _last_user_and_results(body.get("messages") or [], api)
        index = turn_index_of(user_text)
        if index is None or not 0 <= index < len(self.turns):
            return Turn(text="Noted.")
        turn = self.turns[index]
        calls_so_far = 0
        for step, preamble in zip(turn.steps, turn.preambles, strict=True):
            if done <= calls_so_far:
                specs = [ToolCallSpec(name=c.name, arguments=c.arguments) for c in step]
                return Turn(text=preamble, tool_calls=specs)
            calls_so_far += len(step)
        return Turn(text=turn.reply_text)


def is_summary_request(body: dict[str, Any]) -> bool:
    """No tools offered and a system prompt (or first instruction) about summaries."""
    if body.get("tools"):
        return False
    system = body.get("system")
    head = _text_of(system) if system else ""
    messages = body.get("messages") or []
    if messages:
        head += _text_of(messages[0].get("content"))[:2000]
    return "summar" in head.lower()


def plan_summary_tokens(
    *,
    previous_tokens: int,
    new_tokens: int,
    max_tokens: int,
    condense: bool,
    budget_tokens: int | None = None,
) -> int:
    """How long the summary should be: carried summary plus a share of the new material,
    near the prompt's stated budget at most, and always under the request's max_tokens."""
    carry = CONDENSE_RATIO if condense else CARRY_RATIO
    share = NEW_MATERIAL_RATIO / 2 if condense else NEW_MATERIAL_RATIO
    wanted = int(previous_tokens * carry + new_tokens * share) + MIN_SUMMARY_TOKENS
    cap = int(max_tokens * FIT_RATIO)
    if budget_tokens:
        cap = min(cap, int(budget_tokens * BUDGET_OVERSHOOT))
    return max(1, min(wanted, cap))


def write_summary(prompt: str, *, max_tokens: int) -> str:
    """A structured summary of `prompt`, sized by `plan_summary_tokens`."""
    found = _PREVIOUS_RE.search(prompt)
    previous = found.group(2) if found else ""
    new = prompt.replace(previous, "") if previous else prompt
    lowered = prompt.lower()
    budget = _BUDGET_RE.search(prompt)
    target = plan_summary_tokens(
        previous_tokens=tokens_of_text(previous),
        new_tokens=tokens_of_text(new),
        max_tokens=max_tokens,
        condense=any(word in lowered for word in _CONDENSE_WORDS),
        budget_tokens=int(budget.group(1)) if budget else None,
    )
    return _fit(_sections(prompt, new), target * 4)


def _sections(prompt: str, new: str) -> list[str]:
    """The template's headings, filled from the input; tickets only from the new material."""
    paths = _unique(_PATH_RE.findall(prompt))
    tags = _unique(_TAG_RE.findall(new))
    results = _unique(_RESULT_RE.findall(prompt))
    errors = _unique(_ERROR_RE.findall(prompt))
    lines = [
        "## Goal",
        "Fix reliability issues in the hermes_net HTTP client, one ticket at a time.",
        "## Constraints & Preferences",
        "- Reuse the existing retry helper; keep the public API; no new dependencies.",
        "## Progress",
        "### Done",
        f"- Worked through {len(tags)} ticket(s) in this stretch of the session.",
        "### In Progress",
        f"- {tags[-1] if tags else 'None'}",
        "### Blocked",
        "None",
        "## Key Decisions",
        "- Limits stay named constants until a user needs to tune them.",
        "## Relevant Files",
        *[f"- {path}: read or edited" for path in paths[:20]],
        "## Next Steps",
        "- Run the full suite; review the diff.",
        "## Critical Context",
        *[f"- Tests: {r}" for r in results[-6:]],
        *[f"- {e}" for e in errors[-6:]],
    ]
    return lines


def _fit(lines: list[str], target_chars: int) -> str:
    """Trim or extend the summary (with detail lines) to about `target_chars`."""
    text = "\n".join(lines)
    detail = 0
    while len(text) < target_chars:
        detail += 1
        text += (
            f"\n- Detail {detail}: the change keeps request bodies out of logs and leaves "
            "the retry budget and pool sizes as named constants."
        )
    return text[:target_chars].rstrip() or "## Goal\nNone"


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _all_text(body: dict[str, Any]) -> str:
    parts = [_text_of(body.get("system"))]
    parts += [_text_of(m.get("content")) for m in body.get("messages") or ()]
    return "\n".join(p for p in parts if p)


def _last_user_and_results(messages: list[dict[str, Any]], api: str) -> tuple[str, int]:
    """The newest real user prompt's text and how many tool results came after it."""
    results = 0
    for message in reversed(messages):
        role, content = message.get("role"), message.get("content")
        if api == "openai" and role == "tool":
            results += 1
            continue
        if role != "user":
            continue
        blocks = content if isinstance(content, list) else []
        answered = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result")
        if answered:
            results += answered
            continue
        return _text_of(content), results
    return "", results
