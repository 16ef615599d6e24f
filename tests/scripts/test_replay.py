"""The long-session replay on a short run: real runtime, deterministic figures, findable prompts."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sim.replay import ReplayOptions, build_config, run_replay
from sim.report import strip_timings

ROOT = Path(__file__).resolve().parents[2]
SHORT = ReplayOptions(turns=14, context_window=40_000, seed=5)


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_same_seed_gives_the_same_json_apart_from_timings(tmp_path: Path) -> None:
    """Two replays of one seed agree on every figure except measured wall times."""
    modes = ["batch", "micro-always"]
    first = await run_replay(SHORT, modes, tmp_path / "a")
    second = await run_replay(SHORT, modes, tmp_path / "b")
    assert strip_timings(first) == strip_timings(second)
    _check_shape(first)


def _check_shape(result: dict[str, Any]) -> None:
    batch, micro = result["modes"]["batch"], result["modes"]["micro-always"]
    assert batch["batch_compactions"] >= 1 and batch["micro_passes"] == 0
    assert micro["micro_passes"] >= 1
    for totals in (batch, micro):
        assert totals["all_user_messages_findable"], totals["findable"]
        assert totals["store_rows_archived"] > 0
        assert totals["billed_input_equiv"] < totals["billed_input_equiv_without_cache"]
    rows = result["turns"]["batch"]
    assert [r["turn"] for r in rows] == list(range(SHORT.turns))
    assert all(r["cache_read_tokens"] + r["cache_write_tokens"] > 0 for r in rows)
    assert any(r["batch_compaction"] for r in rows)


@pytest.mark.parametrize(
    ("mode", "micro", "when"),
    [("batch", False, "cold"), ("micro-always", True, "always"), ("micro-cold", True, "cold")],
)
def test_modes_map_to_compression_config(mode: str, micro: bool, when: str) -> None:
    """Each mode is one setting of compression.micro_compact and micro_compact_when."""
    config = build_config(mode, SHORT, base_url="http://127.0.0.1:9", db_url="sqlite://")
    assert config.compression.micro_compact is micro
    assert config.compression.micro_compact_when == when
    assert config.model.provider == "anthropic" and config.model.context_length == 40_000


def test_unknown_mode_is_refused() -> None:
    """A typo in the mode fails loudly."""
    with pytest.raises(ValueError, match="unknown mode"):
        build_config("micro", SHORT, base_url="http://127.0.0.1:9", db_url="sqlite://")


async def test_cli_writes_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The script prints JSON, writes --json-out and an SVG plot, and reads a price table."""
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"claude": {"input": 1, "output": 2, "cache_write": 1.25, "cache_read": 0.1}})
    )
    out, plot = tmp_path / "r.json", tmp_path / "occ.svg"
    argv = ["--turns", "3", "--mode", "batch", "--context-window", "40000", "--quiet"]
    argv += ["--price-table", str(prices), "--json-out", str(out), "--plot", str(plot)]
    assert await _script("replay_session").main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["modes"]["batch"]["turns"] == 3 and printed["turns"] == {}
    saved = json.loads(out.read_text())
    assert len(saved["turns"]["batch"]) == 3
    assert saved["modes"]["batch"]["cost_usd"] < saved["modes"]["batch"]["cost_usd_without_cache"]
    assert plot.read_text().startswith("<svg")
