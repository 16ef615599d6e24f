"""The latency model: seconds per call from its usage, the presets' derivation, and the specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.providers.base import Usage
from sim.latency import NO_LATENCY, RATE_PRESETS, Rates, build_latency_model

RATES = Rates(prefill_tok_s=1_000, decode_tok_s=50, first_token_s=0.5, cache_read_cost=0.1)


@pytest.mark.parametrize(
    ("usage", "seconds"),
    [
        (Usage(), 0.5),
        (Usage(input_tokens=2_000), 0.5 + 2.0),
        (Usage(cache_write_tokens=2_000), 0.5 + 2.0),
        (Usage(cache_read_tokens=10_000), 0.5 + 1.0),
        (Usage(output_tokens=100), 0.5 + 2.0),
        (
            Usage(
                input_tokens=500, cache_write_tokens=500, cache_read_tokens=5_000, output_tokens=50
            ),
            0.5 + 1.0 + 0.5 + 1.0,
        ),
    ],
)
def test_seconds_are_prefill_plus_cached_share_plus_decode(usage: Usage, seconds: float) -> None:
    """Uncached prompt at the prefill rate, cached tokens at their share of it, output at the
    decode rate, plus the fixed first-token overhead."""
    assert RATES.seconds(usage) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("prompt", "output", "seconds"),
    [(3_000, 500, 31.3), (800, 20, 2.9), (3_500, 600, 37.3)],
)
def test_local_preset_reproduces_the_seeds_pass_times(
    prompt: int, output: int, seconds: float
) -> None:
    """The seed's 7B local model: a median pass ~31 s, a first pass ~3 s, a large one ~37 s
    (seeds/micro-compaction.md: "passes ran 2 to 37 seconds, median around 31")."""
    usage = Usage(input_tokens=prompt, output_tokens=output)
    assert RATE_PRESETS["local"].seconds(usage) == pytest.approx(seconds, abs=0.05)


def test_hosted_is_faster_than_local_and_caching_cuts_its_prefill() -> None:
    """A hosted model answers a long cold prompt far faster than the laptop; a warm one faster
    still."""
    cold = Usage(input_tokens=100_000, output_tokens=300)
    warm = Usage(input_tokens=1_000, cache_read_tokens=99_000, output_tokens=300)
    hosted, local = RATE_PRESETS["hosted"], RATE_PRESETS["local"]
    assert hosted.seconds(cold) == pytest.approx(0.8 + 25 + 5)
    assert hosted.seconds(warm) < hosted.seconds(cold) / 2
    assert local.seconds(cold) > 5 * hosted.seconds(cold)


def test_none_is_instant() -> None:
    """Without a latency model every call takes no time at all."""
    model = build_latency_model("none")
    assert model is NO_LATENCY and model.is_instant
    big = Usage(input_tokens=10**6, output_tokens=10**5)
    assert model.seconds("main", big) == 0.0 and model.seconds("summary", big) == 0.0


def test_summarizer_rates_can_differ_from_the_main_models() -> None:
    """`hosted` for the agent and `hosted-small` for the summarizer are priced separately."""
    model = build_latency_model("hosted", "hosted-small", shared_server=True)
    usage = Usage(input_tokens=4_000, output_tokens=600)
    assert model.seconds("main", usage) == RATE_PRESETS["hosted"].seconds(usage)
    assert model.seconds("summary", usage) == RATE_PRESETS["hosted-small"].seconds(usage)
    assert model.name == "hosted+hosted-small"
    assert model.describe()["shared_server"] is True
    assert model.describe()["summarizer"]["decode_tok_s"] == 150


def test_rates_come_from_a_json_file(tmp_path: Path) -> None:
    """A JSON file of rates stands in for a preset."""
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"prefill_tok_s": 200, "decode_tok_s": 10}), encoding="utf-8")
    model = build_latency_model(str(path))
    assert model.seconds("summary", Usage(input_tokens=200, output_tokens=10)) == 2.0


@pytest.mark.parametrize(
    ("main", "summarizer", "message"),
    [
        ("fast", None, "unknown latency model 'fast'"),
        ("none", "local", "cannot be mixed"),
        ("missing.json", None, "cannot read rates from missing.json"),
    ],
)
def test_bad_specs_are_refused(main: str, summarizer: str | None, message: str) -> None:
    """A typo, a half-instant model or an unreadable file fails with a clear sentence."""
    with pytest.raises(ValueError, match=message):
        build_latency_model(main, summarizer)


@pytest.mark.parametrize(
    "fields",
    [
        {"prefill_tok_s": 0, "decode_tok_s": 10},
        {"prefill_tok_s": 10, "decode_tok_s": -1},
        {"prefill_tok_s": 10, "decode_tok_s": 10, "cache_read_cost": 1.5},
        {"prefill_tok_s": 10, "decode_tok_s": 10, "first_token_s": -0.1},
    ],
)
def test_impossible_rates_are_refused(fields: dict[str, float]) -> None:
    """Rates must be positive and a cached token cannot cost more than an uncached one."""
    with pytest.raises(ValueError, match="must be"):
        Rates(**fields)


@pytest.mark.parametrize(
    ("main", "summarizer", "shared_server", "shared"),
    [
        ("local", None, None, True),
        ("local", "local", None, True),
        ("local", None, False, False),
        ("local", "hosted-small", None, False),
        ("hosted", None, None, False),
        ("hosted", None, True, True),
    ],
)
def test_one_local_server_is_shared_by_default(
    main: str, summarizer: str | None, shared_server: bool | None, shared: bool
) -> None:
    """Issue 31: `local` is one server answering one request at a time, the summarizer's too,
    unless told otherwise (`--separate-capacity`) or the summarizer runs elsewhere; hosted
    presets have separate capacity unless told to share. The output names the assumption."""
    model = build_latency_model(main, summarizer, shared_server=shared_server)
    assert model.shared_server is shared
    described = model.describe()
    assert described["shared_server"] is shared
    assert described["capacity"].startswith("shared" if shared else "separate")
