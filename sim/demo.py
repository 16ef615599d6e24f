"""`hermes demo`: a short offline replay of a coding session, per compaction mode, with a plot.

No API key and no network: the model is the scripted sim server from `sim/`, the runtime, gateway
runner and store are the real ones. Model calls take the seconds of the seed's local 7B model on
the simulated clock (`--latency-model`), so the report says how long a user would have waited on
compaction. The stores live in a temporary directory; the plot and the JSON go to
`HERMES_HOME/demo/` (or a temporary directory when HERMES_HOME is not writable). Progress shows
as rich bars on a terminal; the micro-compaction telemetry goes to `HERMES_HOME/logs/agent.log`
like a real session's, so `scripts/micro_compaction_report.py` right after reports the passes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agent.config import HermesConfig

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID

    from sim.replay import Progress

__all__ = [
    "DemoProgress",
    "format_demo_report",
    "run_demo",
]


async def run_demo(
    args: argparse.Namespace,
    config: HermesConfig,
    home: Path,
    environ: Mapping[str, str],
    *,
    out: TextIO | None = None,
) -> int:
    """Run the replay for the chosen modes and print what happened; 0 on success."""
    from sim.latency import build_latency_model
    from sim.plot import write_plot
    from sim.replay import MODES, ReplayOptions, run_replay

    stream = out or sys.stdout
    modes = list(MODES) if args.mode == "all" else [args.mode]
    try:
        latency = build_latency_model(args.latency_model)
    except ValueError as exc:
        print(f"hermes demo: {exc}", file=stream)
        return 2
    options = ReplayOptions(
        turns=args.turns,
        context_window=args.context_window,
        seed=args.seed,
        prices=config.pricing,
        latency=latency,
    )
    print(
        f"Hermes demo: {args.turns} turns of a simulated coding session, offline "
        f"(scripted model, no API key); modes: {', '.join(modes)}.",
        file=stream,
        flush=True,
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hermes-demo-") as tmp, _progress(stream, args) as on:
        result = await run_replay(options, modes, Path(tmp), on_progress=on)
    target = _output_dir(args.out, home)
    plot = write_plot(target / "occupancy.svg", result)
    data = target / "replay.json"
    data.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(format_demo_report(result), file=stream)
    print(f"\nPlot: {plot}\nJSON: {data}", file=stream)
    print(f"Done in {time.perf_counter() - started:.1f} s.", file=stream)
    return 0


def format_demo_report(result: Mapping[str, Any]) -> str:
    """What happened, in words and a small table."""
    totals: Mapping[str, Mapping[str, Any]] = result["modes"]
    window = result["options"]["context_window"]
    threshold = max(result["threshold_tokens"].values(), default=0)
    latency = result["options"].get("latency_model", {}).get("name", "none")
    lines = [
        f"Context window {window:,} tokens; compaction threshold {threshold:,} tokens; "
        f"model speed: {latency}.",
        "",
        f"{'mode':<14}{'peak occ':>9}{'mean occ':>9}{'batch':>7}{'micro':>7}"
        f"{'waited':>10}{'longest':>9}{'blocking':>10}{'billed input':>14}{'cost':>9}",
    ]
    for mode, t in totals.items():
        lines.append(
            f"{mode:<14}{t['peak_occupancy_pct']:>8.1f}%{t['mean_occupancy_pct']:>8.1f}%"
            f"{t['batch_compactions']:>7}{t['micro_passes']:>7}"
            f"{t['compaction_wait_s_total']:>8.0f} s{t['compaction_wait_s_max']:>7.0f} s"
            f"{t['blocking_compactions']:>10}{t['billed_input_equiv']:>14,}"
            f"{'$' + format(t['cost_usd'], '.2f'):>9}"
        )
    lines.append("")
    lines += _observations(totals)
    return "\n".join(lines)


def _observations(totals: Mapping[str, Mapping[str, Any]]) -> list[str]:
    notes = []
    for mode, t in totals.items():
        uncached = t["billed_input_equiv_without_cache"]
        if uncached:
            saved = 1 - t["billed_input_equiv"] / uncached
            notes.append(f"{mode}: prompt caching cut the input bill by {saved:.0%}.")
    batch = totals.get("batch")
    for mode in ("micro-always", "micro-cold"):
        micro = totals.get(mode)
        if batch is not None and micro is not None:
            notes.append(
                f"{mode}: peak occupancy {micro['peak_occupancy_pct']:.0f}% against "
                f"{batch['peak_occupancy_pct']:.0f}% batch-only; {micro['batch_compactions']} "
                f"batch compaction(s) against {batch['batch_compactions']}."
            )
    for mode, t in totals.items():
        if t["turns_waiting_on_compaction"]:
            notes.append(
                f"{mode}: {t['turns_waiting_on_compaction']} of {t['turns']} turns waited on "
                f"compaction, {t['compaction_wait_s_total']:.0f} s in all (a reply took "
                f"{t['response_s_p50']:.0f} s at the median, {t['response_s_p95']:.0f} s at p95)."
            )
    found = all(t["all_user_messages_findable"] for t in totals.values())
    notes.append(
        "Every user message is still findable with session_search: "
        + ("yes." if found else "NO (see the JSON's `findable`).")
    )
    return notes


def _output_dir(requested: Path | None, home: Path) -> Path:
    for candidate in (requested, home / "demo"):
        if candidate is None:
            continue
        try:
            candidate.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        return candidate
    return Path(tempfile.mkdtemp(prefix="hermes-demo-out-"))


@contextlib.contextmanager
def _progress(stream: TextIO, args: argparse.Namespace) -> Iterator[Progress]:
    """Progress of the replay: rich bars (turns done, elapsed, time left) on a terminal, a
    line every quarter of the turns elsewhere (a pipe, a log, a test)."""
    if not stream.isatty():
        from sim.progress import ProgressLine

        yield ProgressLine(stream, every=max(1, args.turns // 4))
        return
    from rich.console import Console

    with DemoProgress(Console(file=stream)) as bars:
        yield bars


class DemoProgress:
    """A `sim.replay.Progress` as rich progress bars, one per mode."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bars = Progress(
            TextColumn("{task.description:<13}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("turns"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> DemoProgress:
        self._bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bars.stop()

    def __call__(self, mode: str, done: int, total: int) -> None:
        task = self._tasks.get(mode)
        if task is None:
            task = self._tasks[mode] = self._bars.add_task(mode, total=total)
        self._bars.update(task, completed=done, total=total)
