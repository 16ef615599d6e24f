"""Tests for `agent.pricing`: price lookup, cost, billed-token equivalents and the summary line."""

from __future__ import annotations

import pytest

from agent.config import HermesConfig, PriceEntry
from agent.pricing import (
    billed_token_equivalent,
    cache_hit_ratio,
    estimate_cost_usd,
    format_usage_summary,
    price_for,
)
from agent.providers.base import Usage

SONNET = PriceEntry(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
TABLE = {
    "claude": PriceEntry(input=1.0, output=1.0, cache_write=1.0, cache_read=1.0),
    "claude-sonnet": SONNET,
    "claude-sonnet-4-1m": PriceEntry(input=6.0, output=22.5, cache_write=7.5, cache_read=0.6),
    "gpt-4o": PriceEntry(input=2.5, output=10.0, cache_write=0.0, cache_read=1.25),
}


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-sonnet-4", "claude-sonnet"),
        ("anthropic/claude-sonnet-4-1M", "claude-sonnet-4-1m"),
        ("claude-haiku-4", "claude"),
        ("gpt-4o-mini", "gpt-4o"),
        ("GPT-4O", "gpt-4o"),
        ("llama-3-70b", None),
        ("", None),
    ],
)
def test_price_for_longest_substring_wins(model: str, key: str | None) -> None:
    """The longest key contained in the model name (any case) wins; no match is None."""
    assert price_for(model, TABLE) == (None if key is None else TABLE[key])


def test_price_for_default_table() -> None:
    """The config's default table prices a Sonnet model at the Sonnet rates."""
    assert price_for("claude-sonnet-4-5", HermesConfig().pricing) == SONNET


@pytest.mark.parametrize(
    ("usage", "dollars"),
    [
        (Usage(), 0.0),
        (Usage(input_tokens=1_000_000), 3.0),
        (Usage(output_tokens=1_000_000), 15.0),
        (Usage(cache_write_tokens=1_000_000), 3.75),
        (Usage(cache_read_tokens=1_000_000), 0.30),
        (
            Usage(
                input_tokens=100, output_tokens=50, cache_write_tokens=1000, cache_read_tokens=9000
            ),
            (100 * 3.0 + 50 * 15.0 + 1000 * 3.75 + 9000 * 0.30) / 1e6,
        ),
    ],
)
def test_estimate_cost_usd(usage: Usage, dollars: float) -> None:
    """Each token kind is priced at its own per-million rate."""
    assert estimate_cost_usd(usage, SONNET) == pytest.approx(dollars)


@pytest.mark.parametrize(
    ("usage", "include_output", "expected"),
    [
        (Usage(input_tokens=1000), False, 1000.0),
        (Usage(input_tokens=1000, output_tokens=500), False, 1000.0),
        (Usage(input_tokens=1000, output_tokens=500), True, 1000.0 + 500 * 5),
        (Usage(cache_read_tokens=1000), False, 100.0),
        (Usage(cache_write_tokens=1000), False, 1250.0),
        (Usage(input_tokens=10, cache_write_tokens=100, cache_read_tokens=1000), False, 235.0),
    ],
)
def test_billed_token_equivalent(usage: Usage, include_output: bool, expected: float) -> None:
    """Cost in full-price input tokens: reads count 0.1, writes 1.25, output only when asked."""
    got = billed_token_equivalent(usage, SONNET, include_output=include_output)
    assert got == pytest.approx(expected)


def test_billed_token_equivalent_equals_prompt_tokens_without_cache() -> None:
    """With no cache activity the equivalent is exactly the prompt size, so arms compare."""
    usage = Usage(input_tokens=12_345, output_tokens=99)
    assert billed_token_equivalent(usage, SONNET) == usage.prompt_tokens


def test_billed_token_equivalent_needs_an_input_price() -> None:
    """A free-input price cannot express cost in input tokens and says so."""
    free = PriceEntry(input=0.0, output=0.0, cache_write=0.0, cache_read=0.0)
    with pytest.raises(ValueError, match="input price"):
        billed_token_equivalent(Usage(input_tokens=1), free)


@pytest.mark.parametrize(
    ("usage", "ratio"),
    [
        (Usage(), None),
        (Usage(output_tokens=10), None),
        (Usage(input_tokens=100), 0.0),
        (Usage(input_tokens=10, cache_write_tokens=10, cache_read_tokens=80), 0.8),
        (Usage(cache_read_tokens=50), 1.0),
    ],
)
def test_cache_hit_ratio(usage: Usage, ratio: float | None) -> None:
    """The ratio is cache reads over all prompt tokens, and None with no prompt at all."""
    assert cache_hit_ratio(usage) == (None if ratio is None else pytest.approx(ratio))


@pytest.mark.parametrize(
    ("usage", "model", "expected"),
    [
        (
            Usage(
                input_tokens=1_145,
                output_tokens=456,
                cache_write_tokens=1_200,
                cache_read_tokens=10_000,
            ),
            "claude-sonnet-4",
            "Tokens: 12,345 prompt (10,000 cache read, 1,200 cache write, 1,145 uncached), "
            "456 output\nCache hit ratio: 81.0% · Estimated cost: $0.0178 (claude-sonnet-4)",
        ),
        (
            Usage(input_tokens=400_000, output_tokens=100_000),
            "claude-sonnet-4",
            "Tokens: 400,000 prompt (0 cache read, 0 cache write, 400,000 uncached), "
            "100,000 output\nCache hit ratio: 0.0% · Estimated cost: $2.70 (claude-sonnet-4)",
        ),
        (
            Usage(input_tokens=10),
            "llama-3",
            "Tokens: 10 prompt (0 cache read, 0 cache write, 10 uncached), 0 output\n"
            "Cache hit ratio: 0.0% · Estimated cost: price unknown (llama-3)",
        ),
        (
            Usage(),
            "gpt-4o",
            "Tokens: 0 prompt (0 cache read, 0 cache write, 0 uncached), 0 output\n"
            "Cache hit ratio: n/a · Estimated cost: $0.0000 (gpt-4o)",
        ),
    ],
    ids=["cached-sonnet", "dollars", "unknown-model", "empty"],
)
def test_format_usage_summary(usage: Usage, model: str, expected: str) -> None:
    """The summary shows token kinds, the hit ratio and the cost, or that the price is unknown."""
    assert format_usage_summary(usage, model, TABLE) == expected
