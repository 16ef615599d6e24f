"""Regenerate the replay tables of README.md and docs/benchmarks.md; print the checks as JSON.

    python scripts/replay_table.py --run --write          # replay, then rewrite both pages
    python scripts/replay_table.py --from-json DIR --write   # from saved replay JSON files

`--run` replays issue 31's scenarios in this process, one after the other: 500 turns at a 128K
window and 1,000 turns at 32K, seed 7, `--latency-model local` (one shared model server), every
mode, on the `anthropic` and the `custom` route (about 30-60 minutes on a 2-core machine); each
result is saved as `replay-<window>k-<route>.json` in `--json-dir`. `--from-json` reads such files
or any `scripts/replay_session.py --json-out DIR/replay-<name>.json` output; runs of one scenario
made mode by mode (`--mode X`, in parallel) merge into one. The JSON printed holds every run's
assumptions and its "Done when" checks (`sim.done_when`: the default mode against the batch
baseline of the same run); `--write` puts the full table and the assumptions in
docs/benchmarks.md and the short table in README.md, between their `<!-- replay-... -->` markers,
and redraws docs/replay-500-turns.svg from the first run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.done_when import (  # noqa: E402
    assumption_lines,
    checks,
    full_table,
    replace_block,
    short_table,
)
from sim.plot import write_plot  # noqa: E402
from sim.report import peak_window_pct  # noqa: E402
from sim.scenario import MODES, ROUTES  # noqa: E402

SCENARIOS = ((128_000, 500), (32_000, 1_000))
"""(window, turns): issue 31's two runs."""
FULL_BLOCK, SHORT_BLOCK = "replay-full", "replay-short"
PLOT = "replay-500-turns.svg"
"""docs/: the first run's occupancy and waits per mode (`sim.plot`)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", action="store_true", help="replay every scenario now")
    source.add_argument("--from-json", type=Path, nargs="+", metavar="PATH", help="files or dirs")
    parser.add_argument("--json-dir", type=Path, default=None, help="--run saves results here")
    parser.add_argument("--write", action="store_true", help="rewrite README.md and the docs")
    parser.add_argument("--root", type=Path, default=ROOT, help="the pages' repository root")
    parser.add_argument("--turns-scale", type=float, default=1.0, help="shorter runs (tests)")
    parser.add_argument("--seed", type=int, default=7)
    return parser.parse_args(argv)


async def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    from sim.latency import build_latency_model
    from sim.progress import ProgressLine
    from sim.replay import MODES, ReplayOptions, run_replay

    results = []
    for window, turns in SCENARIOS:
        for route in ROUTES:
            options = ReplayOptions(
                turns=max(2, int(turns * args.turns_scale)),
                context_window=window,
                seed=args.seed,
                latency=build_latency_model("local"),
                route=route,
            )
            started = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="hermes-replay-table-") as tmp:
                result = await run_replay(
                    options, list(MODES), Path(tmp), on_progress=ProgressLine(sys.stderr)
                )
            result["options"]["run_wall_s"] = round(time.perf_counter() - started, 1)
            if args.json_dir is not None:
                args.json_dir.mkdir(parents=True, exist_ok=True)
                name = f"replay-{window // 1000}k-{route}.json"
                (args.json_dir / name).write_text(json.dumps(result), encoding="utf-8")
            results.append(result)
    return results


def load(paths: list[Path]) -> list[dict[str, Any]]:
    """Replay results from files (or every replay-*.json of a directory), in scenario order."""
    files = [f for p in paths for f in (sorted(p.glob("replay-*.json")) if p.is_dir() else [p])]
    results = merged([_completed(json.loads(f.read_text(encoding="utf-8"))) for f in files])
    order = {(w, r): i for i, (w, r) in enumerate((w, r) for w, _ in SCENARIOS for r in ROUTES)}
    return sorted(
        results,
        key=lambda r: order.get((r["options"]["context_window"], r["options"]["route"]), 99),
    )


def merged(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of one scenario saved mode by mode (`--mode X` each) as one result, modes in
    `sim.scenario.MODES` order; runs that differ in any assumption stay apart."""
    by_key: dict[str, dict[str, Any]] = {}
    for result in results:
        options = dict(result["options"])
        options.pop("run_wall_s", None)
        key = json.dumps(options, sort_keys=True)
        into = by_key.setdefault(key, {**result, "modes": {}, "turns": {}, "threshold_tokens": {}})
        for part in ("modes", "turns", "threshold_tokens"):
            into[part].update(result.get(part) or {})
    for result in by_key.values():
        for part in ("modes", "turns", "threshold_tokens"):
            result[part] = {m: result[part][m] for m in MODES if m in result[part]}
    return list(by_key.values())


def _completed(result: dict[str, Any]) -> dict[str, Any]:
    """A result of an older replay without `peak_window_pct`: computed from its rows."""
    window = result["options"]["context_window"]
    for mode, totals in result["modes"].items():
        if "peak_window_pct" not in totals and result.get("turns", {}).get(mode):
            totals["peak_window_pct"] = peak_window_pct(result["turns"][mode], window)
    return result


def report(results: list[dict[str, Any]]) -> dict[str, Any]:
    runs = []
    for result in results:
        found = checks(result)
        runs.append(
            {
                "options": result["options"],
                "checks": [c.json() for c in found],
                "failed": [c.name for c in found if not c.passed],
            }
        )
    return {"runs": runs, "all_met": all(not r["failed"] for r in runs)}


def write_pages(root: Path, results: list[dict[str, Any]]) -> None:
    bench = root / "docs" / "benchmarks.md"
    full = "\n".join(
        [
            "Assumptions of every run:",
            "",
            *assumption_lines(results),
            "",
            "The default mode against the batch baseline of the same run, and issue 31's "
            '"Done when":',
            "",
            short_table(results),
            "",
            "Every mode:",
            "",
            full_table(results),
        ]
    )
    bench.write_text(
        replace_block(bench.read_text(encoding="utf-8"), FULL_BLOCK, full), encoding="utf-8"
    )
    first = next((r for r in results if r.get("turns")), None)
    if first is not None:  # the occupancy plot of the first run (128K, anthropic)
        write_plot(root / "docs" / PLOT, first)
    readme = root / "README.md"
    readme.write_text(
        replace_block(readme.read_text(encoding="utf-8"), SHORT_BLOCK, short_table(results)),
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = asyncio.run(run_all(args)) if args.run else load(args.from_json)
    if not results:
        print("replay_table: no replay results", file=sys.stderr)
        return 2
    if args.write:
        write_pages(args.root, results)
    print(json.dumps(report(results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
