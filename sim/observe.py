"""What the replay observes besides timings: micro telemetry lines, and findability of prompts.

`capture_events` routes structlog into a list for the duration of a run (and restores the
configuration after); `check_findable` asks the store's search and the `session_search` tool for
every prompt of the session by its ticket tag.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import structlog

from sim.conversation import ScriptedTurn
from sim.tools import sim_tool_registry

__all__ = [
    "TELEMETRY_PREFIX",
    "capture_events",
    "check_findable",
    "is_micro_event",
    "micro_outcomes",
]

TELEMETRY_PREFIX = "micro compaction telemetry:"
"""How micro-compaction's one content-free line per pass starts (the seed's format)."""
TELEMETRY_LOGGER = "agent.micro_compaction"
"""The logger real sessions write the telemetry under."""
_MICRO_EVENT_WORDS = ("micro",)


def is_micro_event(event: Mapping[str, Any]) -> bool:
    name = str(event.get("event", ""))
    return any(word in name for word in _MICRO_EVENT_WORDS)


def micro_outcomes(events: Sequence[Mapping[str, Any]], counted: int) -> list[str]:
    """Each pass's outcome, in order, from its telemetry line; without any telemetry, one
    "absorbed" per pass the store's micro counter counted."""
    found = [str(f["outcome"]) for e in events if (f := _telemetry_fields(e)).get("outcome")]
    return found or ["absorbed"] * max(0, counted)


def _telemetry_fields(event: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON of a `micro compaction telemetry: {...}` line (or the event's own keys)."""
    name = str(event.get("event", ""))
    start = name.find("{")
    if name.startswith(TELEMETRY_PREFIX) and start >= 0:
        with contextlib.suppress(ValueError):
            loaded = json.loads(name[start:])
            return loaded if isinstance(loaded, dict) else {}
    return dict(event)


async def check_findable(
    store: Any, session_id: str, conversation: Sequence[ScriptedTurn]
) -> dict[str, Any]:
    """Whether every prompt of the session is found by the store's search and by session_search."""
    from agent.tools.registry import ToolContext

    rows = await store.transcript.show(session_id, include_archived=True)
    ids: dict[Any, set[Any]] = {}
    for m in rows:
        if m.get("role") == "user":
            ids.setdefault(m.get("content"), set()).add(m.get("_id"))
    tool = sim_tool_registry(0)
    ctx = ToolContext(session_id=session_id, services={"store": store})
    by_store = by_tool = 0
    missing: list[str] = []
    for turn in conversation:
        row_ids = ids.get(turn.user_text, set())
        hits = await store.search.search(turn.tag, session_id=session_id, role="user", limit=10)
        found_store = any(h.message_id in row_ids for h in hits)
        text = await tool.run(_search_call(turn.tag), ctx)
        found_tool = any(f"msg {row_id} " in text for row_id in row_ids)
        by_store += found_store
        by_tool += found_tool
        if not (found_store and found_tool):
            missing.append(turn.tag)
    total = len(conversation)
    return {
        "all": by_store == total and by_tool == total,
        "user_messages": total,
        "found_by_store_search": by_store,
        "found_by_session_search_tool": by_tool,
        "missing": missing[:20],
    }


def _search_call(tag: str) -> Any:
    args = json.dumps({"query": tag, "session_only": True, "limit": 10})
    return {
        "id": "check",
        "type": "function",
        "function": {"name": "session_search", "arguments": args},
    }


@contextlib.contextmanager
def capture_events() -> Iterator[list[dict[str, Any]]]:
    """Route structlog events into a list for the duration; then restore.

    structlog's configuration is process-wide; the replay owns the process while it runs, and
    its measurements should not include rendering thousands of log lines to a terminal. The
    one telemetry line per micro pass still goes to the process's log (stdlib logging, which
    `hermes` points at HERMES_HOME/logs/agent.log), as it would in a real session, so the
    micro-compaction report reads the replay's passes.
    """
    captured: list[dict[str, Any]] = []
    previous = structlog.get_config()
    telemetry = logging.getLogger(TELEMETRY_LOGGER)

    def collect(
        _logger: Any, method: str, event_dict: MutableMapping[str, Any]
    ) -> Mapping[str, Any]:
        if method not in ("debug",):
            captured.append(dict(event_dict))
            name = str(event_dict.get("event", ""))
            if name.startswith(TELEMETRY_PREFIX):
                telemetry.info(name)
        raise structlog.DropEvent

    structlog.configure(
        processors=[collect],
        wrapper_class=structlog.BoundLogger,
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    try:
        yield captured
    finally:
        structlog.configure(**previous)
