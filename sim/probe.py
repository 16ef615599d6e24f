"""What the replay asks of a session at its end: are the user's constraints still in the active
context verbatim, and do the archive tools bring early facts back?

Constraints: every `CONSTRAINTS` phrase the simulated user gave must be in the active
transcript word for word (the ledger in the system message, or a user message still active),
and in the session's ledger. Recall: 50 facts of the first fifth of the session are sampled
(seeded): a turn's ticket tag (source: the user's message), the path of its first file tool
call (source: the assistant message that made it) and its test result line (source: the tool
result). Each is asked the way an agent would ask for that ticket: `recall(query=tag,
context=10)`, or `lcm_grep(tag, context=10)` on the lcm engine, following at most three pages;
a fact counts when an answer shows the source row's anchor and the fact itself. The probe also
asks by the fact's own words, with no tag (`found_by_words`, per kind in `by_words`): the
request's text without its ticket tags for a tag fact, the path, the test result line. Paths,
results and the user's phrasings recur across turns, so the ranked search may not put that one
early row within the pages read: that is how a question in words, not a ticket, fares.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.ledger.rules import strip_ledger
from agent.messages import content_text
from agent.tools.registry import ToolContext, ToolRegistry
from sim.conversation import CONSTRAINTS, ScriptedTurn

__all__ = [
    "EARLY_SHARE",
    "FACTS",
    "check_constraints",
    "check_recall",
    "sample_facts",
    "without_tags",
]

FACTS = 50
EARLY_SHARE = 0.2
CONTEXT_ROWS = 10
MAX_PAGES = 3
_PATH_TOOLS = ("read_file", "edit_file")
_RESULT_RE = re.compile(r"^\d+ passed, \d+ failed in [\d.]+s$", re.M)
_TAG_RE = re.compile(r"(?:\bTicket )?\bHRM-\d{4,}\b")
_KINDS = ("tag", "path", "test_result")


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """Something said in an early turn, and the stored row it was said in."""

    kind: str
    """tag | path | test_result"""
    turn: int
    tag: str
    text: str
    """What must show in the source row's block for the fact to count."""
    words: str
    """The fact in its own words, without any ticket tag: what a question in words asks."""
    row_id: int


async def check_constraints(
    store: Any, session_id: str, conversation: Sequence[ScriptedTurn]
) -> dict[str, Any]:
    """How many of the constraints the user gave are in the active context and the ledger."""
    given = [c for c in CONSTRAINTS if any(c in t.user_text for t in conversation)]
    texts = [content_text(m) for m in await store.transcript.load_active(session_id)]
    active = "\n".join(texts)
    without_ledger = "\n".join(strip_ledger(t) for t in texts)
    ledger = [i.text for i in await store.ledger.list_instructions(session_id)]
    in_context = [c for c in given if c in active]
    in_ledger = [c for c in given if any(c in text for text in ledger)]
    return {
        "given": len(given),
        "in_active_context": len(in_context),
        "in_active_context_without_ledger": sum(1 for c in given if c in without_ledger),
        "in_ledger": len(in_ledger),
        "ledger_entries": len(ledger),
        "missing": [c for c in given if c not in in_context],
    }


async def sample_facts(
    store: Any, session_id: str, conversation: Sequence[ScriptedTurn], seed: int
) -> list[Fact]:
    """`FACTS` facts from the first `EARLY_SHARE` of the turns, with their source rows."""
    rows = sorted(
        await store.transcript.show(session_id, include_archived=True), key=lambda m: m["_id"]
    )
    early = conversation[: max(1, int(len(conversation) * EARLY_SHARE))]
    candidates: dict[str, list[Fact]] = {"tag": [], "path": [], "test_result": []}
    for turn in early:
        for fact in _facts_of(turn, _rows_of(rows, turn)):
            candidates[fact.kind].append(fact)
    rng = random.Random(seed * 7_919 + FACTS)
    quota = {"tag": 17, "path": 17, "test_result": 16}
    picked: list[Fact] = []
    for kind, facts in candidates.items():
        picked += rng.sample(facts, min(quota[kind], len(facts)))
    return sorted(picked, key=lambda f: (f.turn, f.kind))


async def check_recall(
    tools: ToolRegistry, store: Any, session_id: str, facts: Sequence[Fact], *, tool: str
) -> dict[str, Any]:
    """How many facts the archive tool returns with their source row."""
    ctx = ToolContext(session_id=session_id, services={"store": store})
    found = calls = 0
    by_words = dict.fromkeys(_KINDS, 0)
    missing: list[str] = []
    for fact in facts:
        hit, used = await _ask(tools, ctx, tool, fact, fact.tag)
        found, calls = found + hit, calls + used
        by_words[fact.kind] += (await _ask(tools, ctx, tool, fact, fact.words))[0]
        if not hit:
            missing.append(f"{fact.kind}:{fact.tag}")
    return {
        "tool": tool,
        "facts": len(facts),
        "found": found,
        "calls": calls,
        "found_by_words": sum(by_words.values()),
        "by_kind": {k: sum(1 for f in facts if f.kind == k) for k in _KINDS},
        "by_words": by_words,
        "missing": missing[:20],
    }


async def _ask(
    tools: ToolRegistry, ctx: ToolContext, tool: str, fact: Fact, query: str
) -> tuple[bool, int]:
    """Whether the source row came back within MAX_PAGES, and how many calls that took."""
    for page in range(1, MAX_PAGES + 1):
        text = await tools.run(_call(tool, query, page), ctx)
        if _shows(text, fact):
            return True, page
        if "More:" not in text:
            return False, page
    return False, MAX_PAGES


def _rows_of(rows: Sequence[Any], turn: ScriptedTurn) -> list[Any]:
    """The turn's stored rows: its user message and what followed until the next prompt."""
    start = next(
        (
            i
            for i, m in enumerate(rows)
            if m["role"] == "user" and m.get("content") == turn.user_text
        ),
        None,
    )
    if start is None:
        return []
    out = [rows[start]]
    for m in rows[start + 1 :]:
        if m["role"] == "user" and m.get("_kind") != "summary":
            break
        if m["role"] != "system" and m.get("_kind") != "summary":
            out.append(m)
    return out


def _facts_of(turn: ScriptedTurn, rows: Sequence[Any]) -> list[Fact]:
    if not rows:
        return []
    facts = [
        Fact(
            kind="tag",
            turn=turn.index,
            tag=turn.tag,
            text=turn.tag,
            words=without_tags(turn.user_text),
            row_id=rows[0]["_id"],
        )
    ]
    path = next(((m, p) for m in rows[1:] if (p := _path_of(m))), None)
    if path is not None:
        facts.append(_fact("path", turn, path[1], path[0]))
    result = next(((m, r) for m in rows[1:] if (r := _result_of(m))), None)
    if result is not None:
        facts.append(_fact("test_result", turn, result[1], result[0]))
    return facts


def _fact(kind: str, turn: ScriptedTurn, text: str, row: Any) -> Fact:
    return Fact(kind=kind, turn=turn.index, tag=turn.tag, text=text, words=text, row_id=row["_id"])


def without_tags(text: str) -> str:
    """The request in its own words: every ticket tag (and a "Ticket" before it) removed."""
    return " ".join(_TAG_RE.sub("", text).replace("()", "").split())


def _path_of(message: Any) -> str:
    """The path of the message's first file tool call, or ""."""
    for call in message.get("tool_calls") or ():
        if call["function"]["name"] in _PATH_TOOLS:
            path = json.loads(call["function"]["arguments"] or "{}").get("path")
            if isinstance(path, str):
                return path
    return ""


def _result_of(message: Any) -> str:
    """The "N passed, M failed in Xs" line of a test run's output, or ""."""
    if message["role"] != "tool":
        return ""
    found = _RESULT_RE.search(str(message.get("content") or ""))
    return found.group(0) if found else ""


def _call(tool: str, words: str, page: int) -> Any:
    if tool == "lcm_grep":
        args: dict[str, Any] = {"pattern": re.escape(words) + r"\b", "context": CONTEXT_ROWS}
    else:
        args = {"query": words, "context": CONTEXT_ROWS}
    args["page"] = page
    return {
        "id": "probe",
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps(args)},
    }


def _shows(text: str, fact: Fact) -> bool:
    """The answer shows the source row (its anchor line) and the fact inside that row's block."""
    block = re.search(rf"^#{fact.row_id} [^\n]*\n(.*?)(?=^#\d+ |^— match |\Z)", text, re.M | re.S)
    return block is not None and fact.text in block.group(0)
