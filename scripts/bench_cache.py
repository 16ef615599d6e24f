"""What prompt caching saves: one seeded conversation with caching on and off; print JSON.

    python scripts/bench_cache.py --turns 50 [--ttl 5m|1h] [--price-table prices.json]

Both runs go through the real runtime, agent loop and store against the offline sim server,
whose Anthropic cache emulation honours the TTL on the conversation's simulated idle gaps.
"Billed-token equivalent" prices every prompt token in full-price input tokens (cache writes at
the write price, reads at the read price), so the uncached run's figure is its prompt tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.replay import MODES, ReplayOptions, load_price_table, run_replay  # noqa: E402

_KEEP = (
    "model_calls",
    "prompt_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "uncached_input_tokens",
    "output_tokens",
    "billed_input_equiv",
    "cost_usd",
    "batch_compactions",
    "micro_passes",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--context-window", type=int, default=128_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ttl", choices=["5m", "1h"], default="5m")
    parser.add_argument("--mode", choices=MODES, default="batch")
    parser.add_argument("--price-table", type=Path, default=None)
    return parser.parse_args(argv)


async def bench(options: ReplayOptions, mode: str) -> dict[str, Any]:
    """Run the conversation with caching on, then off; the comparison as a JSON-ready dict."""
    runs: dict[str, dict[str, Any]] = {}
    for label, caching in (("cached", True), ("uncached", False)):
        with tempfile.TemporaryDirectory(prefix="hermes-bench-cache-") as tmp:
            result = await run_replay(replace(options, caching=caching), [mode], Path(tmp))
        totals = result["modes"][mode]
        runs[label] = {key: totals[key] for key in _KEEP}
    cached, uncached = runs["cached"], runs["uncached"]
    input_saving = 1 - cached["billed_input_equiv"] / max(1, uncached["billed_input_equiv"])
    cost_saving = 1 - cached["cost_usd"] / max(1e-9, uncached["cost_usd"])
    hit_ratio = cached["cache_read_tokens"] / max(1, cached["prompt_tokens"])
    return {
        "turns": options.turns,
        "context_window": options.context_window,
        "seed": options.seed,
        "cache_ttl": options.cache_ttl,
        "mode": mode,
        "model": options.served_model,
        "cached": cached,
        "uncached": uncached,
        "cache_hit_ratio": round(hit_ratio, 4),
        "input_cost_saving": round(input_saving, 4),
        "total_cost_saving": round(cost_saving, 4),
        "seed_claim_input_saving": 0.75,
    }


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = ReplayOptions(
        turns=args.turns,
        context_window=args.context_window,
        seed=args.seed,
        cache_ttl=args.ttl,
        prices=load_price_table(args.price_table),
    )
    print(json.dumps(await bench(options, args.mode), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
