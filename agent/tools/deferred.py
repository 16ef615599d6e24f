"""Deferred tool loading: past a threshold the model sees an index and loads schemas on demand.

With a handful of tools every schema goes into every request. With many (MCP servers bring tens
each) the request would grow by kilobytes per tool, so the deferrable tools are replaced by one
`tool_search` tool whose description is a compact index (names and one-line descriptions, fewer
words as the list grows). The model searches or names what it needs; the result says which tools
were loaded (first line `loaded: a, b`), and from the next call on their schemas join the request.

What is loaded is read back from the transcript, never kept aside: a compaction that folds the
search away unloads the tool, and the model can search again. Pure functions over values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from agent.access import MCP_SEPARATOR
from agent.messages import ChatMessage, content_text
from agent.providers.base import ToolSpec

__all__ = [
    "LOADED_PREFIX",
    "TOOL_SEARCH",
    "find_tools",
    "index_text",
    "loaded_names",
    "offered_specs",
    "search_result",
    "search_spec",
]

TOOL_SEARCH = "tool_search"
LOADED_PREFIX = "loaded: "
INDEX_BUDGET_CHARS = 4_000
"""The index shrinks (shorter descriptions, then names only, then servers) to stay under this."""
DESCRIPTION_CHARS = (70, 40)
SEARCH_LIMIT = 5
NAMED_LIMIT = 20

_SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "Exact tool names from the index (space or comma separated), or "
            "words describing what you need.",
        }
    },
    "required": ["query"],
}


def offered_specs(
    specs: Sequence[ToolSpec],
    transcript: Sequence[ChatMessage],
    *,
    is_deferrable: Callable[[str], bool],
    defer_after: int | None,
) -> tuple[ToolSpec, ...]:
    """The tools for the next request: all of `specs` while the deferrable ones are at most
    `defer_after` (None: never defer); else the others, `tool_search` with the index, and the
    deferrable tools the transcript loaded (in `specs` order, so the prefix stays cacheable)."""
    deferred = [s for s in specs if is_deferrable(s.name)]
    if defer_after is None or len(deferred) <= defer_after:
        return tuple(specs)
    loaded = loaded_names(transcript)
    eager = [s for s in specs if not is_deferrable(s.name)]
    return (*eager, search_spec(deferred), *(s for s in deferred if s.name in loaded))


def loaded_names(transcript: Iterable[ChatMessage]) -> frozenset[str]:
    """Tools the transcript loaded (a `tool_search` result's first line) or already called."""
    names: set[str] = set()
    for message in transcript:
        if message.get("role") == "tool" and message.get("name") == TOOL_SEARCH:
            first = content_text(message).partition("\n")[0]
            if first.startswith(LOADED_PREFIX):
                names.update(n.strip() for n in first.removeprefix(LOADED_PREFIX).split(","))
        for call in message.get("tool_calls") or ():
            names.add(call["function"]["name"])
    names.discard("")
    return frozenset(names)


def search_spec(deferred: Sequence[ToolSpec]) -> ToolSpec:
    """`tool_search`, its description carrying the index of `deferred`."""
    return ToolSpec(
        name=TOOL_SEARCH,
        description=(
            "More tools are available than are loaded. Load some by exact name or find them "
            "by words; loaded tools can be called from your next step on. Index:\n"
            + index_text(deferred)
        ),
        parameters=_SEARCH_PARAMETERS,
    )


def index_text(specs: Sequence[ToolSpec], *, budget_chars: int = INDEX_BUDGET_CHARS) -> str:
    """One line per tool (`name: what it does`), fewer words until it fits `budget_chars`:
    shorter descriptions, then names grouped by server, then servers with their tool counts."""
    for width in DESCRIPTION_CHARS:
        text = "\n".join(f"{s.name}: {one_line(s.description, width)}" for s in specs)
        if len(text) <= budget_chars:
            return text
    groups: dict[str, list[str]] = {}
    for spec in specs:
        server, sep, tool = spec.name.partition(MCP_SEPARATOR)
        groups.setdefault(server if sep else "", []).append(tool if sep else spec.name)
    text = "\n".join(
        f"{server}{MCP_SEPARATOR}{{{', '.join(tools)}}}" if server else ", ".join(tools)
        for server, tools in groups.items()
    )
    if len(text) <= budget_chars:
        return text
    return "\n".join(
        f"{server or 'other'}: {len(tools)} tools (search by words)"
        for server, tools in groups.items()
    )


def one_line(description: str, width: int) -> str:
    """The first sentence or line of `description`, at most `width` characters."""
    line = " ".join(description.split())
    sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    return sentence if len(sentence) <= width else sentence[: width - 1].rstrip() + "…"


def find_tools(query: str, deferred: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The tools `query` names exactly (all of them, up to 20), else the best matches of its
    words in names (weighted) and descriptions (at most 5, none that match no word)."""
    by_name = {s.name.lower(): s for s in deferred}
    words = [w for w in re.split(r"[\s,]+", query.lower()) if w]
    named = [by_name[w] for w in dict.fromkeys(words) if w in by_name]
    if named:
        return named[:NAMED_LIMIT]
    terms = [w for w in re.split(r"[^\w-]+", query.lower()) if len(w) > 1]
    scored = []
    for spec in deferred:
        name, description = spec.name.lower(), spec.description.lower()
        score = sum(3 * (t in name) + (t in description) for t in terms)
        if score:
            scored.append((-score, spec.name, spec))
    return [spec for _, _, spec in sorted(scored, key=lambda x: (x[0], x[1]))[:SEARCH_LIMIT]]


def search_result(found: Sequence[ToolSpec]) -> str:
    """What `tool_search` answers: the loaded names first (read back by `loaded_names`)."""
    if not found:
        return "No tool matches. Try other words, or an exact name from the index."
    lines = [f"- {s.name}: {one_line(s.description, 200)}" for s in found]
    return "\n".join(
        [
            LOADED_PREFIX + ", ".join(s.name for s in found),
            f"Loaded {len(found)} tool(s); call them from your next step:",
            *lines,
        ]
    )
