"""`hermes demo` and `scripts/bench_cache.py`: short offline runs that report what they measured."""

from __future__ import annotations

import argparse
import importlib.util
import io
from pathlib import Path

from agent.config import HermesConfig
from sim.demo import add_demo_parser, run_demo
from sim.replay import ReplayOptions

ROOT = Path(__file__).resolve().parents[2]


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_demo_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["demo", *argv])


async def test_demo_prints_the_story_and_writes_the_plot(hermes_home: Path) -> None:
    """The demo runs every mode offline, shows progress, prints occupancy, compactions and the
    seconds a user waited on them, and names its plot."""
    args = _parse(["--turns", "6", "--context-window", "40000"])
    out = io.StringIO()
    assert await run_demo(args, HermesConfig(), hermes_home, {}, out=out) == 0
    text = out.getvalue()
    for mode in ("batch", "micro-always", "micro-cold"):
        assert f"\n{mode} " in text
        assert f"replay {mode}: 6/6 turns" in text
    assert "model speed: local." in text and "waited" in text and "blocking" in text
    assert "findable with session_search: yes" in text
    assert (hermes_home / "demo" / "occupancy.svg").exists()
    assert f"Plot: {hermes_home / 'demo' / 'occupancy.svg'}" in text


def test_demo_defaults_are_short_and_small() -> None:
    """Without flags the demo replays 70 turns in a 64K window, all modes, at the seed's local
    model's speed."""
    args = _parse([])
    assert (args.turns, args.context_window, args.mode) == (70, 64_000, "all")
    assert args.latency_model == "local"


async def test_demo_refuses_an_unknown_latency_model(hermes_home: Path) -> None:
    """A typo in --latency-model ends the demo with code 2 and one sentence."""
    out = io.StringIO()
    args = _parse(["--latency-model", "quick"])
    assert await run_demo(args, HermesConfig(), hermes_home, {}, out=out) == 2
    assert "unknown latency model 'quick'" in out.getvalue()


async def test_bench_cache_compares_cached_and_uncached() -> None:
    """Caching on bills fewer input-token equivalents than caching off for the same conversation."""
    spec = importlib.util.spec_from_file_location(
        "bench_cache", ROOT / "scripts" / "bench_cache.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = await module.bench(ReplayOptions(turns=5, context_window=64_000), "batch")
    cached, uncached = result["cached"], result["uncached"]
    assert uncached["cache_read_tokens"] == 0 and cached["cache_read_tokens"] > 0
    assert cached["prompt_tokens"] == uncached["prompt_tokens"]
    assert 0 < result["input_cost_saving"] < 1
