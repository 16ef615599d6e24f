"""Replay a long seeded session through the real runtime, per compaction mode; print JSON.

    python scripts/replay_session.py --turns 500 --context-window 128000 --mode all \
        --plot occupancy.svg --json-out replay.json

The model is the offline sim server (`sim/`): no API key, no network. See `sim.replay`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.plot import write_plot  # noqa: E402
from sim.replay import MODES, ReplayOptions, load_price_table, run_replay  # noqa: E402
from sim.report import format_table  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--context-window", type=int, default=128_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mode", choices=[*MODES, "all"], default="all")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument(
        "--price-table",
        type=Path,
        default=None,
        help="JSON {model-substring: {input, output, "
        "cache_write, cache_read}} in $ per million tokens (default: the config's table)",
    )
    parser.add_argument("--plot", type=Path, default=None, help="FILE.svg or FILE.png")
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the stores here")
    parser.add_argument("--quiet", action="store_true", help="print only the totals, not per turn")
    return parser.parse_args(argv)


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = ReplayOptions(
        turns=args.turns,
        context_window=args.context_window,
        seed=args.seed,
        latency_ms=args.latency_ms,
        prices=load_price_table(args.price_table),
    )
    modes = list(MODES) if args.mode == "all" else [args.mode]
    with tempfile.TemporaryDirectory(prefix="hermes-replay-") as tmp:
        result = await run_replay(options, modes, args.workdir or Path(tmp))
    text = json.dumps(result if not args.quiet else {**result, "turns": {}}, indent=1)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(text)
    print(format_table(result["modes"]), file=sys.stderr)
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        written = write_plot(args.plot, result)
        print(f"plot written to {written}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
