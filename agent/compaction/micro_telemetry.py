"""Micro-compaction telemetry: the content-free JSON line and the plain lines, as strings."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "TELEMETRY_EVENT",
    "TELEMETRY_PREFIX",
    "defrag_line",
    "messages_line",
    "skip_line",
    "telemetry_line",
]

TELEMETRY_PREFIX = "micro compaction telemetry: "
TELEMETRY_EVENT = "micro_compaction"
_FIRST_FIELDS = (
    "event",
    "outcome",
    "tokens_before",
    "tokens_after",
    "tokens_delta",
    "occupancy_pct",
    "threshold_tokens",
    "context_limit",
    "exchange_tokens",
    "rolling_summary_tokens",
    "passes_total",
    "tokens_saved_total",
    "duration_ms",
)


def telemetry_line(fields: dict[str, Any]) -> str:
    """`micro compaction telemetry: {...}` with the seed's fields first, compact JSON.

    Only counts, timings, ids and outcome names belong in `fields`: never message text.
    """
    ordered = {"event": TELEMETRY_EVENT, **{k: fields[k] for k in _FIRST_FIELDS if k in fields}}
    ordered.update((k, v) for k, v in fields.items() if k not in ordered)
    return TELEMETRY_PREFIX + json.dumps(ordered, separators=(",", ":"), ensure_ascii=True)


def messages_line(before: int, after: int) -> str:
    return f"Micro-compaction: {before} -> {after} messages"


def defrag_line(summary_chars: int) -> str:
    return f"Micro-compaction defrag: rolling summary re-summarized ({summary_chars} chars)"


def skip_line(cursor: int, failures: int) -> str:
    return (
        f"Micro-compaction: skipping exchange at cursor {cursor} after {failures} "
        "consecutive failures"
    )
