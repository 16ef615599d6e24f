"""The long-session replay on a short run: real runtime, deterministic figures, findable prompts,
and what the user waited for on the simulated clock."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sim.conversation import generate_conversation
from sim.latency import RATE_PRESETS, LatencyModel, Rates, build_latency_model
from sim.replay import ReplayOptions, build_config, replay_mode, run_replay
from sim.report import strip_timings
from sim.scenario import LOCAL_SIM_MODEL

ROOT = Path(__file__).resolve().parents[2]
SHORT = ReplayOptions(turns=14, context_window=40_000, seed=5)
SLOW_SUMMARIZER = Rates(prefill_tok_s=1_000, decode_tok_s=10, first_token_s=1.0)


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_same_seed_gives_the_same_json_apart_from_timings(tmp_path: Path) -> None:
    """Two replays of one seed agree on every figure except measured wall times, the simulated
    seconds of the latency model included (the pump's order is deterministic)."""
    modes = ["batch", "micro-always"]
    options = replace(SHORT, latency=build_latency_model("local"))
    first = await run_replay(options, modes, tmp_path / "a")
    second = await run_replay(options, modes, tmp_path / "b")
    assert strip_timings(first) == strip_timings(second)
    _check_shape(first)
    assert first["modes"]["batch"]["compaction_wait_s_total"] > 0


def _check_shape(result: dict[str, Any]) -> None:
    batch, micro = result["modes"]["batch"], result["modes"]["micro-always"]
    assert batch["batch_compactions"] >= 1 and batch["micro_passes"] == 0
    assert micro["micro_passes"] >= 1
    for totals in (batch, micro):
        assert totals["all_user_messages_findable"], totals["findable"]
        _check_archive(totals)
        assert totals["store_rows_archived"] > 0
        assert totals["billed_input_equiv"] < totals["billed_input_equiv_without_cache"]
    rows = result["turns"]["batch"]
    assert [r["turn"] for r in rows] == list(range(SHORT.turns))
    assert all(r["cache_read_tokens"] + r["cache_write_tokens"] > 0 for r in rows)
    assert any(r["batch_compaction"] for r in rows)


def _check_archive(totals: dict[str, Any]) -> None:
    """Every constraint given is in the active context; every sampled early fact came back."""
    probes = totals["archive_probes"]
    constraints, recall = probes["constraints"], probes["recall"]
    assert constraints["given"] >= 1 and constraints["in_active_context"] == constraints["given"]
    assert constraints["in_ledger"] == constraints["given"], constraints
    assert recall["facts"] >= 3 and recall["found"] == recall["facts"], recall
    assert totals["recall"] == f"{recall['found']}/{recall['facts']}"


async def test_the_lcm_mode_keeps_rules_and_recalls_with_lcm_grep(tmp_path: Path) -> None:
    """The lcm engine runs the same session, compacts, and answers the probes with lcm_grep."""
    result = await run_replay(SHORT, ["lcm"], tmp_path)
    totals = result["modes"]["lcm"]
    assert totals["batch_compactions"] >= 1 and totals["micro_passes"] == 0
    assert totals["archive_probes"]["recall"]["tool"] == "lcm_grep"
    _check_archive(totals)


@pytest.mark.parametrize(
    ("mode", "micro", "when", "speculative"),
    [
        ("batch", False, "cold", False),
        ("hygiene-only", False, "cold", False),
        ("speculative", False, "cold", True),
        ("micro-always", True, "always", True),
        ("micro-cold", True, "cold", True),
        ("lcm", False, "cold", True),
    ],
)
def test_modes_map_to_compression_config(
    mode: str, micro: bool, when: str, speculative: bool
) -> None:
    """Each mode is one setting of compression.micro_compact, micro_compact_when and
    speculative (micro-cold is the default config); the lcm mode names its engine; batch and
    hygiene-only share a config (batch's in-turn compaction is the driver's)."""
    config = build_config(mode, SHORT, base_url="http://127.0.0.1:9", db_url="sqlite://")
    assert config.compression.micro_compact is micro
    assert config.compression.micro_compact_when == when
    assert config.compression.speculative is speculative
    assert config.context.engine == ("lcm" if mode == "lcm" else "compressor")
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


async def test_a_turn_never_waits_for_a_pass_even_when_it_outlasts_the_gap(
    tmp_path: Path,
) -> None:
    """Issue 14: with a summarizer slower than many idle gaps, a pass still running when the
    user's next message arrives is not waited for: every turn's response is its own model
    time, no compaction wait, and passes that outlasted their gap were still adopted later."""
    latency = LatencyModel(name="slow", main=RATE_PRESETS["hosted"], summarizer=SLOW_SUMMARIZER)
    options = replace(SHORT, latency=latency)
    conversation = generate_conversation(seed=options.seed, turns=options.turns)
    run = await replay_mode(options, "micro-always", conversation, tmp_path)
    summaries = [s for s in run.spans if s.role == "summary"]
    outlasted = 0
    for prev, row in zip(run.rows, run.rows[1:], strict=False):
        reply = run.origin_s + prev.arrived_s + prev.response_s
        arrival = run.origin_s + row.arrived_s
        passes = [s for s in summaries if reply - 2e-3 <= s.arrived_s < arrival]
        if passes and sum(SLOW_SUMMARIZER.seconds(s.usage) for s in passes) > row.gap_s:
            outlasted += 1
    assert outlasted > 0  # the scenario really has passes longer than the gap
    for row in run.rows:
        assert row.compaction_wait_s == 0 and row.other_wait_s == 0, row.turn
        assert row.response_s == pytest.approx(row.model_s, abs=2e-3)
    assert sum(o == "absorbed" for r in run.rows for o in r.micro_outcomes) >= 1


async def test_batch_compactions_block_the_turn_under_the_local_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the script with `--latency-model local`, batch mode's compactions run inside
    turns: each is blocking, every summarizer second is waited for, progress goes to stderr."""
    argv = ["--turns", "40", "--mode", "batch", "--context-window", "40000", "--quiet"]
    argv += ["--latency-model", "local", "--workdir", str(tmp_path)]
    assert await _script("replay_session").main(argv) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    totals = printed["modes"]["batch"]
    assert printed["options"]["latency_model"]["name"] == "local"
    assert totals["blocking_compactions"] == totals["batch_compactions"] > 0
    assert totals["turns_waiting_on_compaction"] == totals["blocking_compactions"]
    assert totals["compaction_wait_s_total"] == pytest.approx(totals["summary_s_total"], abs=0.1)
    assert totals["compaction_wait_s_max"] > 10 and totals["other_wait_s_total"] == 0
    assert totals["untimed_model_calls"] == 0, "every model call went through the meter"
    assert 0 < totals["response_s_p50"] <= totals["response_s_p95"] <= totals["response_s_max"]
    assert "replay batch: 25/40 turns" in captured.err
    assert "replay batch: 40/40 turns" in captured.err


async def test_an_unknown_latency_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in --latency-model stops the script with exit code 2 and says why."""
    assert await _script("replay_session").main(["--latency-model", "fast"]) == 2
    assert "unknown latency model 'fast'" in capsys.readouterr().err


def test_the_custom_route_is_a_local_server_without_cache() -> None:
    """`--route custom` configures what a local model is: `model.provider: custom` at the
    server's OpenAI-compatible `/v1`, a model name that is not Claude; anthropic stays as it was."""
    options = replace(SHORT, route="custom")
    config = build_config("micro-cold", options, base_url="http://127.0.0.1:9", db_url="sqlite://")
    assert config.model.provider == "custom" and config.model.default == LOCAL_SIM_MODEL
    assert config.model.base_url == "http://127.0.0.1:9/v1"
    anthropic = build_config("micro-cold", SHORT, base_url="http://127.0.0.1:9", db_url="sqlite://")
    assert (
        anthropic.model.provider == "anthropic" and anthropic.model.base_url == "http://127.0.0.1:9"
    )


async def test_the_route_changes_what_the_agent_does(tmp_path: Path) -> None:
    """The route is not only a price: on `custom` the runtime sends Chat Completions with no
    cache breakpoints and no cache TTL (so micro-compaction's cadence is the uncached one), and
    every prompt token is billed; on `anthropic` the prompt cache is on and cache reads are
    billed at the cache price."""
    custom = await run_replay(replace(SHORT, route="custom"), ["micro-cold"], tmp_path / "c")
    cached = await run_replay(SHORT, ["micro-cold"], tmp_path / "a")
    totals, cached_totals = custom["modes"]["micro-cold"], cached["modes"]["micro-cold"]
    assert custom["options"]["route"] == "custom" and custom["options"]["caching"] is False
    assert totals["cache_read_tokens"] == totals["cache_write_tokens"] == 0
    assert totals["billed_input_equiv"] == totals["billed_input_equiv_without_cache"]
    assert cached_totals["cache_read_tokens"] > 0
    assert cached_totals["billed_input_equiv"] < cached_totals["billed_input_equiv_without_cache"]
    assert totals["all_user_messages_findable"] and totals["untimed_model_calls"] == 0


async def test_the_runtime_on_the_custom_route_has_no_cache_ttl(tmp_path: Path) -> None:
    """What micro-compaction's cadence reads (`AgentDeps.cache_ttl`): None on the custom route
    (`agent.prompt_caching.caching_decision`: cache_control only for Claude on Anthropic or
    OpenRouter), "5m" on the anthropic route."""
    from cli.runtime import Runtime

    for route, ttl in (("custom", None), ("anthropic", "5m")):
        options = replace(SHORT, route=route)
        db_url = f"sqlite+aiosqlite:///{tmp_path / route}.db"
        config = build_config("micro-cold", options, base_url="http://127.0.0.1:9", db_url=db_url)
        runtime = await Runtime.start(config, tmp_path / route, {})
        try:
            assert runtime.deps.cache_ttl == ttl, route
        finally:
            await runtime.aclose()


async def test_batch_compacts_in_the_turn_at_the_threshold(tmp_path: Path) -> None:
    """The baseline is the anchor's batch: a message that finds the context at the threshold
    waits for a compaction inside its turn (run in the driver's `turn-compaction` task); every
    compaction is waited for and counts as blocking, and a turn holding two counts two."""
    options = replace(SHORT, context_window=30_000, latency=build_latency_model("local"))
    result = await run_replay(options, ["batch"], tmp_path)
    batch, rows = result["modes"]["batch"], result["turns"]["batch"]
    assert batch["blocking_by_origin"].get("turn-compaction", 0) >= 1
    assert batch["batch_compactions"] == sum(r["compactions"] for r in rows) >= 2
    assert batch["blocking_compactions"] >= batch["batch_compactions"]
    assert batch["compaction_wait_s_total"] == pytest.approx(batch["summary_s_total"], abs=0.1)
    assert result["options"]["baseline_mode"] == "batch"


async def test_back_to_back_clients_leave_no_idle_gap(tmp_path: Path) -> None:
    """With `back_to_back` every message arrives the moment the previous reply is out: the
    rows' gaps are 0 and the next arrival is the previous reply; the output says so."""
    options = replace(SHORT, latency=build_latency_model("local"), back_to_back=True)
    result = await run_replay(options, ["speculative"], tmp_path)
    rows = result["turns"]["speculative"]
    assert all(r["gap_s"] == 0 for r in rows)
    for prev, row in zip(rows, rows[1:], strict=False):
        assert row["arrived_s"] == pytest.approx(prev["arrived_s"] + prev["response_s"], abs=2e-3)
    assert result["options"]["back_to_back"] is True
    assert result["options"]["pace"].startswith("back-to-back")


async def test_the_output_states_every_assumption(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The JSON names capacity, route, pace, seed, window and turns; `--separate-capacity`
    changes the capacity it names; recall is reported by tag and by words."""
    argv = ["--turns", "4", "--mode", "speculative", "--context-window", "40000", "--quiet"]
    argv += ["--latency-model", "local", "--route", "custom", "--workdir", str(tmp_path)]
    assert await _script("replay_session").main(argv) == 0
    shared = json.loads(capsys.readouterr().out)
    assert await _script("replay_session").main([*argv, "--separate-capacity"]) == 0
    separate = json.loads(capsys.readouterr().out)
    options = shared["options"]
    assert options["capacity"].startswith("shared") and separate["options"]["capacity"].startswith(
        "separate"
    )
    assert (options["route"], options["seed"], options["context_window"], options["turns"]) == (
        "custom",
        7,
        40_000,
        4,
    )
    assert options["back_to_back"] is False and "idle gaps" in options["pace"]
    totals = shared["modes"]["speculative"]
    recall = totals["archive_probes"]["recall"]
    assert totals["recall_by_words"] == f"{recall['found_by_words']}/{recall['facts']}"
    assert sum(recall["by_words"].values()) == recall["found_by_words"]
