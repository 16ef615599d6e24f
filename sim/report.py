"""Replay results as values: one row per turn, totals per mode, and the text table; pure functions."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agent.config import PriceEntry
from agent.pricing import billed_token_equivalent, estimate_cost_usd
from agent.providers.base import Usage

__all__ = [
    "CallRecord",
    "TurnRow",
    "blocking_by_origin",
    "format_table",
    "peak_window_pct",
    "strip_timings",
    "summarize_calls",
    "summarize_mode",
    "summarize_waits",
    "usage_of",
]

TIMING_KEYS = frozenset(
    {
        "wait_ms",
        "latency_ms",
        "micro_ms",
        "overhead_ms",
        "wall_s",
        "longest_stall_ms",
        "mean_wait_ms",
        "overhead_ms_mean",
        "overhead_ms_p95",
        "overhead_ms_max",
        "store_ms",
        "client_ms",
        "overhead_store_ms_mean",
        "overhead_client_ms_mean",
        "overhead_other_ms_mean",
        "micro_ms_mean",
        "micro_ms_max",
        "longest_micro_ms",
    }
)
"""Keys whose values are measured wall time; everything else is deterministic for a seed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """One model call as the sim server answered it."""

    kind: str
    """agent | summary"""
    usage: Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRow:
    """What one user turn did and cost."""

    turn: int
    kind: str
    gap_s: float
    messages_active: int
    prompt_tokens: int
    """Prompt of the turn's last model call (input + cache write + cache read)."""
    context_tokens: int
    """The runtime's own count of the active transcript after the turn and its micro pass."""
    occupancy_pct: float
    """`context_tokens` as a share of the compaction threshold."""
    cache_read_tokens: int
    cache_write_tokens: int
    input_tokens: int
    model_calls: int
    summary_calls: int
    micro: str | None
    """The micro pass outcome (absorbed, defrag, skipped, failed, ...) or None when none ran."""
    micro_outcomes: tuple[str, ...] = ()
    """Every pass that ended between this message and the next, in order (`micro` is the last);
    with a slow summarizer one turn's pass can end in the next turn's window."""
    micro_ms: float
    batch_compaction: bool
    """A batch compaction (threshold, hygiene or context-too-long) fired during this turn."""
    compactions: int = 0
    """How many (a turn can hold two: its own at the threshold, then hygiene or too long)."""
    wait_ms: float
    """Submit to reply, excluding deliberate simulated model latency."""
    latency_ms: float
    """Deliberate simulated model latency inside the wait."""
    overhead_ms: float
    """Wall time of the turn and its micro pass minus the time spent inside the sim server."""
    store_ms: float = 0.0
    """The part of the overhead spent awaiting the session store."""
    client_ms: float = 0.0
    """The part spent in the provider client (SDK request building, HTTP, stream parsing)."""
    arrived_s: float = 0.0
    """Simulated seconds from the start of the session to this message (`sim.waits` for the
    rest of the simulated-time fields; all 0 but this one without a latency model)."""
    response_s: float = 0.0
    """Simulated seconds from the message to the reply."""
    model_s: float = 0.0
    compaction_wait_s: float = 0.0
    """The part of `response_s` the user waited because of compaction."""
    other_wait_s: float = 0.0
    blocking_compactions: int = 0
    """Summarizer jobs (compactions, micro passes) that delayed this turn (`sim.waits`)."""
    blocking_jobs: tuple[int, ...] = ()
    summary_s: float = 0.0
    """Summarizer seconds started between this message and the next, in the background or not."""


def usage_of(raw: Mapping[str, Any], *, billed_cache: bool = True) -> Usage:
    """A usage block as billed: Anthropic's (cache reads and writes apart) or OpenAI Chat
    Completions' (`prompt_tokens` includes `prompt_tokens_details.cached_tokens`). Without
    `billed_cache` every prompt token is input at the full price (a route with no cache)."""
    if "prompt_tokens" in raw:
        details = raw.get("prompt_tokens_details") or {}
        prompt = int(raw.get("prompt_tokens") or 0)
        cached = int(details.get("cached_tokens") or 0) if billed_cache else 0
        return Usage(
            input_tokens=prompt - cached,
            output_tokens=int(raw.get("completion_tokens") or 0),
            cache_read_tokens=cached,
        )
    usage = Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_write_tokens=int(raw.get("cache_creation_input_tokens") or 0),
        cache_read_tokens=int(raw.get("cache_read_input_tokens") or 0),
    )
    if billed_cache:
        return usage
    return Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.output_tokens)


def summarize_calls(calls: Sequence[CallRecord], price: PriceEntry) -> dict[str, Any]:
    """Token totals and billed-token equivalents over every model call of a run."""
    total = sum((c.usage for c in calls), Usage())
    summary = sum((c.usage for c in calls if c.kind == "summary"), Usage())
    uncached = Usage(input_tokens=total.prompt_tokens, output_tokens=total.output_tokens)
    return {
        "model_calls": len(calls),
        "summarizer_calls": sum(1 for c in calls if c.kind == "summary"),
        "summarizer_input_tokens": summary.prompt_tokens,
        "summarizer_output_tokens": summary.output_tokens,
        "prompt_tokens": total.prompt_tokens,
        "cache_read_tokens": total.cache_read_tokens,
        "cache_write_tokens": total.cache_write_tokens,
        "uncached_input_tokens": total.input_tokens,
        "output_tokens": total.output_tokens,
        "billed_input_equiv": round(billed_token_equivalent(total, price)),
        "billed_input_equiv_without_cache": round(billed_token_equivalent(uncached, price)),
        "cost_usd": round(estimate_cost_usd(total, price), 4),
        "cost_usd_without_cache": round(estimate_cost_usd(uncached, price), 4),
    }


def summarize_mode(
    rows: Sequence[TurnRow],
    *,
    calls: Sequence[CallRecord],
    price: PriceEntry,
    store_rows: Mapping[str, int],
    findable: Mapping[str, Any],
    wall_s: float,
    archive: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The totals of one mode's run."""
    occupancy = [r.occupancy_pct for r in rows] or [0.0]
    overhead = sorted(r.overhead_ms for r in rows) or [0.0]
    micro_rows = [r for r in rows if r.micro is not None]
    outcomes: dict[str, int] = {}
    for outcome in (o for r in rows for o in r.micro_outcomes):
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return {
        "turns": len(rows),
        "peak_occupancy_pct": round(max(occupancy), 1),
        "mean_occupancy_pct": round(statistics.fmean(occupancy), 1),
        "final_occupancy_pct": round(occupancy[-1], 1),
        "batch_compactions": sum(max(r.compactions, int(r.batch_compaction)) for r in rows),
        "micro_passes": sum(outcomes.values()),
        "micro_outcomes": dict(sorted(outcomes.items())),
        **summarize_calls(calls, price),
        "longest_stall_ms": round(max((r.wait_ms for r in rows), default=0.0), 1),
        "mean_wait_ms": round(statistics.fmean([r.wait_ms for r in rows] or [0.0]), 2),
        "longest_micro_ms": round(max((r.micro_ms for r in micro_rows), default=0.0), 1),
        "store_rows_active": int(store_rows.get("active", 0)),
        "store_rows_archived": int(store_rows.get("archived", 0)),
        "store_rows_summaries": int(store_rows.get("summaries", 0)),
        "overhead_ms_mean": round(statistics.fmean(overhead), 3),
        "overhead_ms_p95": round(overhead[int(0.95 * (len(overhead) - 1))], 3),
        "overhead_ms_max": round(overhead[-1], 3),
        "overhead_store_ms_mean": round(_mean([r.store_ms for r in rows]), 3),
        "overhead_client_ms_mean": round(_mean([r.client_ms for r in rows]), 3),
        "overhead_other_ms_mean": round(
            _mean([r.overhead_ms - r.store_ms - r.client_ms for r in rows]), 3
        ),
        **summarize_waits(rows),
        "all_user_messages_findable": bool(findable.get("all")),
        "findable": dict(findable),
        **_archive_figures(archive or {}),
        "wall_s": round(wall_s, 2),
    }


def peak_window_pct(rows: Iterable[Mapping[str, Any]], window: int) -> float:
    """The largest prompt sent (or context held after a turn) as a share of the window, from
    the rows' JSON (`row_dict`)."""
    peak = max((max(r["prompt_tokens"], r["context_tokens"]) for r in rows), default=0)
    return round(100 * peak / max(1, window), 1)


def blocking_by_origin(rows: Sequence[TurnRow], origins: Mapping[int, str]) -> dict[str, int]:
    """Blocking jobs by the kind of task that ran them (`turn`: hygiene or a compaction inside
    the turn's loop; `end-of-turn`: background work; `turn-compaction`: the batch baseline's)."""
    out: dict[str, int] = {}
    for job in sorted({j for r in rows for j in r.blocking_jobs}):
        origin = origins.get(job, "")
        out[origin] = out.get(origin, 0) + 1
    return dict(sorted(out.items()))


def summarize_waits(rows: Sequence[TurnRow]) -> dict[str, Any]:
    """What the user felt on the simulated clock: compaction waits and response times."""
    waits = [r.compaction_wait_s for r in rows]
    response = sorted(r.response_s for r in rows) or [0.0]
    return {
        "compaction_wait_s_total": round(sum(waits), 1),
        "compaction_wait_s_max": round(max(waits, default=0.0), 1),
        "turns_waiting_on_compaction": sum(1 for w in waits if w > 0),
        "blocking_compactions": len({j for r in rows for j in r.blocking_jobs}),
        "response_s_p50": round(_percentile(response, 0.50), 1),
        "response_s_p95": round(_percentile(response, 0.95), 1),
        "response_s_max": round(response[-1], 1),
        "model_s_total": round(sum(r.model_s for r in rows), 1),
        "summary_s_total": round(sum(r.summary_s for r in rows), 1),
        "other_wait_s_total": round(sum(r.other_wait_s for r in rows), 1),
        "simulated_hours": round((rows[-1].arrived_s + rows[-1].response_s) / 3600, 2)
        if rows
        else 0.0,
    }


def _percentile(ordered: Sequence[float], share: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _archive_figures(archive: Mapping[str, Any]) -> dict[str, Any]:
    """`constraints_in_context` ("6/6"), `recall` ("50/50") and the probes' details."""
    constraints, recall = archive.get("constraints") or {}, archive.get("recall") or {}
    return {
        "constraints_in_context": f"{constraints.get('in_active_context', 0)}/{constraints.get('given', 0)}",
        "recall": f"{recall.get('found', 0)}/{recall.get('facts', 0)}",
        "recall_by_words": f"{recall.get('found_by_words', 0)}/{recall.get('facts', 0)}",
        "archive_probes": dict(archive),
    }


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def row_dict(row: TurnRow) -> dict[str, Any]:
    return asdict(row)


def strip_timings(value: Any) -> Any:
    """`value` without measured wall-time fields: what must match between runs of one seed."""
    if isinstance(value, dict):
        return {k: strip_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    return value


_COLUMNS = (
    ("peak occ %", "peak_occupancy_pct", "{:.1f}"),
    ("mean occ %", "mean_occupancy_pct", "{:.1f}"),
    ("batch", "batch_compactions", "{:d}"),
    ("micro", "micro_passes", "{:d}"),
    ("summ calls", "summarizer_calls", "{:d}"),
    ("summ in tok", "summarizer_input_tokens", "{:,}"),
    ("billed equiv", "billed_input_equiv", "{:,}"),
    ("cost $", "cost_usd", "{:.2f}"),
    ("stall ms", "longest_stall_ms", "{:.0f}"),
    ("wait s", "compaction_wait_s_total", "{:.1f}"),
    ("max wait s", "compaction_wait_s_max", "{:.1f}"),
    ("turns waiting", "turns_waiting_on_compaction", "{:d}"),
    ("blocking", "blocking_compactions", "{:d}"),
    ("p50/p95 s", None, ""),
    ("ovh ms", "overhead_ms_mean", "{:.2f}"),
    ("rows act/arch", None, ""),
    ("findable", "all_user_messages_findable", "{}"),
    ("rules kept", "constraints_in_context", "{}"),
    ("recall tag", "recall", "{}"),
    ("recall words", "recall_by_words", "{}"),
)


def format_table(totals: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table of the modes' totals."""
    header = "| mode | " + " | ".join(c[0] for c in _COLUMNS) + " |"
    lines = [header, "|" + "---|" * (len(_COLUMNS) + 1)]
    for mode, t in totals.items():
        cells = []
        for label, key, fmt in _COLUMNS:
            if key is None and label == "p50/p95 s":
                cells.append(f"{t['response_s_p50']:.1f}/{t['response_s_p95']:.1f}")
            elif key is None:
                cells.append(f"{t['store_rows_active']}/{t['store_rows_archived']}")
            else:
                cells.append(fmt.format(t[key]))
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
