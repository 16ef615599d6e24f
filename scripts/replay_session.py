"""Replay a long seeded session through the real runtime, per compaction mode; print JSON.

    python scripts/replay_session.py --turns 500 --context-window 128000 --mode all \
        --latency-model local --plot occupancy.svg --json-out replay.json

    python scripts/replay_session.py --sessions 10 --facts 50 --json-out memory.json

The model is the offline sim server (`sim/`): no API key, no network. See `sim.replay`.
`--sessions N` (N > 1) is the multi-session mode (`sim.memory_replay`): the turns split into N
sessions of one person, facts told early and asked later; it reports how many are found in
memory and the tokens the profile adds per request, with its assumptions.
`--latency-model` makes every model call take simulated seconds (`sim.latency`: `local` is the
seed's 7B model on a laptop, `hosted` a hosted frontier model), so each turn reports how long the
user waited because of compaction. `local` is one server that answers one request at a time, the
summarizer's included (`--separate-capacity` gives summaries their own unlimited capacity); the
output's `options.latency_model.capacity` names the assumption used. Progress goes to stderr, the JSON to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.latency import LATENCY_PRESETS, build_latency_model  # noqa: E402
from sim.plot import write_plot  # noqa: E402
from sim.progress import ProgressLine  # noqa: E402
from sim.replay import MODES, ROUTES, ReplayOptions, load_price_table, run_replay  # noqa: E402
from sim.report import format_table  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--context-window", type=int, default=128_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mode", choices=[*MODES, "all"], default="all")
    parser.add_argument(
        "--route",
        choices=ROUTES,
        default="anthropic",
        help="anthropic: Claude-shaped, prompt cache (5 min); custom: a local model through "
        "model.provider: custom, no prompt cache (the agent runs as on any local server)",
    )
    parser.add_argument(
        "--back-to-back",
        action="store_true",
        help="no idle gap: each message arrives the moment the previous reply is out",
    )
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="real (wall) delay per model reply"
    )
    parser.add_argument(
        "--latency-model",
        default="none",
        metavar="MODEL",
        help=f"simulated model speed: {', '.join(LATENCY_PRESETS)} or a JSON file of rates "
        "(prefill_tok_s, decode_tok_s, first_token_s, cache_read_cost); default none (instant)",
    )
    parser.add_argument(
        "--summarizer-latency",
        default=None,
        metavar="MODEL",
        help="the summarizer's speed, if not the main model's (e.g. hosted-small)",
    )
    capacity = parser.add_mutually_exclusive_group()
    capacity.add_argument(
        "--shared-model-server",
        action="store_true",
        help="main model and summarizer are one server that serves one request at a time "
        "(the default of --latency-model local)",
    )
    capacity.add_argument(
        "--separate-capacity",
        action="store_true",
        help="every model call is served when it is made, summaries beside turns "
        "(the default of the hosted presets)",
    )
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
    parser.add_argument(
        "--sessions",
        type=int,
        default=1,
        help="multi-session mode: split the turns into this many sessions of one person",
    )
    parser.add_argument("--facts", type=int, default=50, help="multi-session mode: facts told")
    parser.add_argument("--quiet", action="store_true", help="print only the totals, not per turn")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    return parser.parse_args(argv)


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sessions > 1:
        return await _multi_session(args)
    try:
        latency = build_latency_model(
            args.latency_model, args.summarizer_latency, shared_server=_shared(args)
        )
    except ValueError as exc:
        print(f"replay_session: {exc}", file=sys.stderr)
        return 2
    options = ReplayOptions(
        turns=args.turns,
        context_window=args.context_window,
        seed=args.seed,
        latency_ms=args.latency_ms,
        prices=load_price_table(args.price_table),
        latency=latency,
        route=args.route,
        back_to_back=args.back_to_back,
    )
    modes = list(MODES) if args.mode == "all" else [args.mode]
    progress = None if args.no_progress else ProgressLine(sys.stderr)
    with tempfile.TemporaryDirectory(prefix="hermes-replay-") as tmp:
        result = await run_replay(options, modes, args.workdir or Path(tmp), on_progress=progress)
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


def _shared(args: argparse.Namespace) -> bool | None:
    """The capacity flags: None leaves it to the preset (`sim.latency.shares_by_default`)."""
    if args.shared_model_server:
        return True
    if args.separate_capacity:
        return False
    return None


async def _multi_session(args: argparse.Namespace) -> int:
    from sim.memory_replay import MemoryReplayOptions, run_memory_replay

    options = MemoryReplayOptions(
        turns=args.turns,
        sessions=args.sessions,
        facts=args.facts,
        context_window=args.context_window,
        seed=args.seed,
    )
    with tempfile.TemporaryDirectory(prefix="hermes-memory-replay-") as tmp:
        result = await run_memory_replay(options, args.workdir or Path(tmp))
    text = json.dumps(result, indent=1)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
