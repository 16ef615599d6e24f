"""`hermes demo` and `scripts/bench_cache.py`: short offline runs that report what they measured."""

from __future__ import annotations

import argparse
import importlib.util
import io
from pathlib import Path

from agent.config import HermesConfig
from cli.demo_cmd import add_demo_parser
from sim.demo import run_demo
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


def _plain(text: str) -> str:
    """Terminal output without its colour and cursor codes."""
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


class _Terminal(io.StringIO):
    """An output stream that says it is a terminal, as a user's would."""

    def isatty(self) -> bool:
        return True


async def test_demo_on_a_terminal_shows_rich_progress_bars(hermes_home: Path) -> None:
    """On a terminal each mode gets a progress bar with turns done, elapsed time and time left."""
    args = _parse(["--turns", "4", "--context-window", "40000", "--mode", "batch"])
    out = _Terminal()
    assert await run_demo(args, HermesConfig(), hermes_home, {}, out=out) == 0
    text = _plain(out.getvalue())
    assert "━" in text and "4/4 turns" in text and "left" in text
    assert "replay batch:" not in text  # the line form is for pipes and logs


def test_progress_bars_count_each_mode_on_its_own() -> None:
    """`DemoProgress` is the replay's progress callback: one bar per mode, done of total."""
    from rich.console import Console

    from sim.demo import DemoProgress

    out = io.StringIO()
    with DemoProgress(Console(file=out, force_terminal=True, width=100)) as bars:
        bars("batch", 3, 10)
        bars("micro-cold", 10, 10)
    text = _plain(out.getvalue())
    assert "3/10 turns" in text and "10/10 turns" in text and "micro-cold" in text


async def test_the_report_right_after_the_demo_reports_its_passes(hermes_home: Path) -> None:
    """The demo's micro-compaction telemetry lands in HERMES_HOME/logs/agent.log (as `hermes
    demo` configures logging), so the report script finds exactly the passes the demo made."""
    import json

    from agent.logging_setup import configure_logging, shutdown_logging

    configure_logging(log_dir=hermes_home / "logs", console=False)
    try:
        args = _parse(["--turns", "8", "--context-window", "40000", "--mode", "micro-always"])
        assert await run_demo(args, HermesConfig(), hermes_home, {}, out=io.StringIO()) == 0
    finally:
        shutdown_logging()
    made = json.loads((hermes_home / "demo" / "replay.json").read_text())
    passes = made["modes"]["micro-always"]["micro_passes"]
    assert passes > 0
    spec = importlib.util.spec_from_file_location(
        "micro_report", ROOT / "scripts" / "micro_compaction_report.py"
    )
    assert spec is not None and spec.loader is not None
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    printed = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(printed):
        assert report.main([str(hermes_home / "logs" / "agent.log"), "--json"]) == 0
    figures = json.loads(printed.getvalue())["all"]
    assert figures["passes"] == passes and figures["outcomes"]
