"""Summarise micro-compaction telemetry from agent.log: passes, outcomes, savings, durations.

Usage: python scripts/micro_compaction_report.py [--per-session] [--json] [LOGFILE ...]

LOGFILE defaults to $HERMES_HOME/logs/agent.log (HERMES_HOME defaults to ~/.hermes). Lines are
the JSON objects `agent/logging_setup.py` writes (the telemetry sits in their "event" text);
plain-text lines containing `micro compaction telemetry: {...}` are read too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

PREFIX = "micro compaction telemetry: "
"""Must equal `agent.compaction.micro_telemetry.TELEMETRY_PREFIX` (a test checks it)."""


def parse_line(line: str) -> dict[str, Any] | None:
    """The telemetry payload of one log line, or None when the line carries none."""
    text = line.strip()
    if not text or PREFIX not in text:
        return None
    if text.startswith("{"):
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict) and isinstance(record.get("event"), str):
            text = record["event"]
    start = text.find(PREFIX)
    if start < 0:
        return None
    try:
        payload = json.JSONDecoder().raw_decode(text[start + len(PREFIX) :].lstrip())[0]
    except json.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) else None


def read_passes(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                payload = parse_line(line)
                if payload is not None:
                    yield payload


def summarise(passes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The figures for a set of passes (one session or all of them)."""
    durations = [float(p.get("duration_ms") or 0) for p in passes]
    overheads = [float(p["overhead_ms"]) for p in passes if "overhead_ms" in p]
    absorbed = [
        int(p.get("exchange_tokens") or 0) for p in passes if p.get("outcome") == "absorbed"
    ]
    occupancy = [p.get("occupancy_pct") for p in passes if p.get("occupancy_pct") is not None]
    return {
        "passes": len(passes),
        "outcomes": dict(Counter(str(p.get("outcome", "?")) for p in passes).most_common()),
        "net_tokens_saved": -sum(int(p.get("tokens_delta") or 0) for p in passes),
        "mean_exchange_tokens": round(statistics.fmean(absorbed), 1) if absorbed else None,
        "duration_ms_median": _median(durations),
        "duration_ms_p95": _p95(durations),
        "overhead_ms_median": _median(overheads),
        "overhead_ms_p95": _p95(overheads),
        "cache_break_tokens": sum(int(p.get("cache_break_tokens") or 0) for p in passes),
        "last_occupancy_pct": occupancy[-1] if occupancy else None,
    }


def render(title: str, figures: dict[str, Any]) -> str:
    outcomes = ", ".join(f"{k} {v}" for k, v in figures["outcomes"].items()) or "none"
    mean = figures["mean_exchange_tokens"]
    return "\n".join(
        [
            title,
            f"  passes:                 {figures['passes']}",
            f"  outcomes:               {outcomes}",
            f"  net tokens saved:       {figures['net_tokens_saved']}",
            f"  mean absorbed exchange: {'-' if mean is None else f'{mean} tokens'}",
            f"  pass duration:          median {_ms(figures['duration_ms_median'])}, "
            f"p95 {_ms(figures['duration_ms_p95'])}",
            f"  non-LLM part:           median {_ms(figures['overhead_ms_median'])}, "
            f"p95 {_ms(figures['overhead_ms_p95'])}",
            f"  cache-break tokens:     {figures['cache_break_tokens']}",
            f"  last occupancy:         {_pct(figures['last_occupancy_pct'])}",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "logfiles", nargs="*", type=Path, help="default: $HERMES_HOME/logs/agent.log"
    )
    parser.add_argument("--per-session", action="store_true", help="one block per session too")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    paths = args.logfiles or [_default_log()]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"micro_compaction_report: no such log file: {', '.join(missing)}", file=sys.stderr)
        return 2
    passes = list(read_passes(paths))
    report: dict[str, Any] = {"all": summarise(passes)}
    if args.per_session:
        sessions: dict[str, list[dict[str, Any]]] = {}
        for p in passes:
            sessions.setdefault(str(p.get("session_id", "?")), []).append(p)
        report["sessions"] = {sid: summarise(ps) for sid, ps in sessions.items()}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(render("micro-compaction: all sessions", report["all"]))
    for sid, figures in report.get("sessions", {}).items():
        print(render(f"session {sid}", figures))
    return 0


def _default_log() -> Path:
    home = Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes").expanduser()
    return home / "logs" / "agent.log"


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _p95(values: Sequence[float]) -> float | None:
    """Nearest-rank 95th percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)], 2)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g} ms"


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value}%"


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from cli.output import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main))
