"""Does a new summary still name what it replaced? Salient terms, pure functions over text.

A defrag asks the summarizer to fold the un-absorbed middle into the rolling summary. A model
that answers with the old summary unchanged (or drops the middle) must not be rewarded: the
middle would silently leave the context. What survives summarising best is concrete: file
paths, identifiers, ticket tags, error names, numbers. If most of those from the absorbed
messages are missing from the new summary, the middle was not represented.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from agent.messages import ChatMessage, content_text

__all__ = ["MIN_COVERAGE", "coverage", "salient_terms"]

MIN_COVERAGE = 0.5
"""Share of the absorbed messages' salient terms a summary must still contain."""
MAX_TERMS = 40
TOOL_RESULT_CHARS = 300
"""Only the start of a tool result counts: its bulk is file text, not what the work was about."""

_PATTERNS = (
    re.compile(r"`([^`\n]{2,60})`"),  # code spans
    re.compile(r"\b(?:[\w.-]+/)+[\w.-]+\b"),  # paths with a directory
    re.compile(r"\b[\w-]+\.(?:py|js|ts|tsx|go|rs|md|json|ya?ml|toml|txt|sh|c|h|cpp|java|rb|sql)\b"),
    re.compile(r"\b[A-Z][A-Z0-9]+-\d+\b"),  # ticket tags
    re.compile(r"\b\w+(?:Error|Exception)\b"),
    re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"),  # snake_case identifiers
    re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"),  # CamelCase identifiers
)


def salient_terms(messages: Sequence[ChatMessage]) -> list[str]:
    """The concrete terms of `messages`, most frequent first (at most MAX_TERMS)."""
    counts: dict[str, int] = {}
    for text in _texts(messages):
        for pattern in _PATTERNS:
            for match in pattern.finditer(text):
                term = match.group(match.lastindex or 0)
                counts[term] = counts.get(term, 0) + 1
    ranked = sorted(counts, key=lambda t: (-counts[t], t))
    return ranked[:MAX_TERMS]


def coverage(terms: Sequence[str], summary: str) -> float:
    """Share of `terms` that appear in `summary` (1.0 when there are none to look for)."""
    if not terms:
        return 1.0
    return sum(1 for term in terms if term in summary) / len(terms)


def _texts(messages: Sequence[ChatMessage]) -> Iterable[str]:
    for msg in messages:
        text = content_text(msg)
        yield text[:TOOL_RESULT_CHARS] if msg.get("role") == "tool" else text
        for call in msg.get("tool_calls") or ():
            yield call["function"]["arguments"]
