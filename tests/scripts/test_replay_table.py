"""scripts/replay_table.py: from saved replay results to the checks' JSON and the two pages."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from sim.latency import build_latency_model
from sim.replay import ReplayOptions, run_replay

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "replay_table", ROOT / "scripts" / "replay_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pages_carry_the_markers() -> None:
    """README.md and docs/benchmarks.md have the blocks the script rewrites."""
    assert "<!-- replay-short:start -->" in (ROOT / "README.md").read_text(encoding="utf-8")
    bench = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "<!-- replay-full:start -->" in bench and "<!-- replay-full:end -->" in bench


async def test_tables_and_checks_from_a_real_short_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A short real replay of the default and the baseline, saved as JSON: the script prints
    its assumptions and checks, and writes both tables into copies of the pages."""
    options = ReplayOptions(
        turns=8, context_window=40_000, seed=5, latency=build_latency_model("local")
    )
    result = await run_replay(replace(options, route="custom"), ["batch", "micro-cold"], tmp_path)
    saved = tmp_path / "json" / "replay-40k-custom.json"
    saved.parent.mkdir()
    saved.write_text(json.dumps(result), encoding="utf-8")
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text("x\n<!-- replay-short:start -->\n<!-- replay-short:end -->\n")
    (root / "docs" / "benchmarks.md").write_text(
        "<!-- replay-full:start -->\n<!-- replay-full:end -->\n"
    )
    argv = ["--from-json", str(saved.parent), "--write", "--root", str(root)]
    assert _script().main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    run = printed["runs"][0]
    assert run["options"]["route"] == "custom" and run["options"]["capacity"].startswith("shared")
    assert {c["name"] for c in run["checks"]} >= {"wait <= 5% of batch", "cost <= batch"}
    bench = (root / "docs" / "benchmarks.md").read_text()
    assert "| 40K, 8 turns, custom | batch |" in bench and "- capacity: shared" in bench
    assert "route `custom`" in bench
    assert "| 40K, 8 turns, custom |" in (root / "README.md").read_text()
    assert (root / "docs" / "replay-500-turns.svg").read_text().startswith("<svg")


def test_runs_saved_mode_by_mode_merge_into_one_scenario() -> None:
    """`--mode X` runs of one scenario merge (modes in the replay's order); another route or
    window stays a run of its own."""

    def run(route: str, mode: str) -> dict[str, object]:
        options = {"context_window": 32_000, "route": route, "turns": 10, "run_wall_s": 1.0}
        return {"options": options, "modes": {mode: {}}, "turns": {mode: []}}

    merged = _script().merged(
        [run("custom", "micro-cold"), run("custom", "batch"), run("anthropic", "batch")]
    )
    assert [list(r["modes"]) for r in merged] == [["batch", "micro-cold"], ["batch"]]
