"""Cost accounting: per-model prices, estimated cost, cache hit ratio and the usage summary line.

Prices come from the config's ``pricing`` table (US dollars per million tokens, `PriceEntry`),
keyed by model-name substrings; the longest matching key wins, as with compression thresholds.
`Usage.input_tokens` is already the uncached remainder on every provider, so one formula prices
Anthropic and OpenAI usage alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.config import PriceEntry
from agent.providers.base import Usage

__all__ = [
    "TOKENS_PER_PRICE_UNIT",
    "billed_token_equivalent",
    "cache_hit_ratio",
    "estimate_cost_usd",
    "format_usage_summary",
    "price_for",
]

TOKENS_PER_PRICE_UNIT = 1_000_000
"""Prices are quoted per million tokens."""


def price_for(model: str, table: Mapping[str, PriceEntry]) -> PriceEntry | None:
    """The entry whose key is the longest substring of `model` (case-insensitive); None if none."""
    name = model.lower()
    matches = [key for key in table if key and key.lower() in name]
    if not matches:
        return None
    best = min(matches, key=lambda key: (-len(key), key))
    return table[best]


def estimate_cost_usd(usage: Usage, price: PriceEntry) -> float:
    """What `usage` costs in US dollars: each token kind at its own price."""
    micro_dollars = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_write_tokens * price.cache_write
        + usage.cache_read_tokens * price.cache_read
    )
    return micro_dollars / TOKENS_PER_PRICE_UNIT


def billed_token_equivalent(
    usage: Usage, price: PriceEntry, *, include_output: bool = False
) -> float:
    """The prompt's cost in full-price input tokens (cache reads count as a fraction of one).

    Without caching this equals `usage.prompt_tokens`, so the two are directly comparable. Output
    is left out by default because caching does not change it; `include_output` adds it.
    """
    if price.input <= 0:
        raise ValueError("a billed-token equivalent needs a positive input price")
    weighted = (
        usage.input_tokens * price.input
        + usage.cache_write_tokens * price.cache_write
        + usage.cache_read_tokens * price.cache_read
    )
    if include_output:
        weighted += usage.output_tokens * price.output
    return weighted / price.input


def cache_hit_ratio(usage: Usage) -> float | None:
    """The share of prompt tokens read from cache; None when there were no prompt tokens."""
    if usage.prompt_tokens == 0:
        return None
    return usage.cache_read_tokens / usage.prompt_tokens


def format_usage_summary(usage: Usage, model: str, table: Mapping[str, PriceEntry]) -> str:
    """Two lines for /status and `hermes sessions show`: token counts, then hit ratio and cost."""
    tokens = (
        f"Tokens: {usage.prompt_tokens:,} prompt ({usage.cache_read_tokens:,} cache read, "
        f"{usage.cache_write_tokens:,} cache write, {usage.input_tokens:,} uncached), "
        f"{usage.output_tokens:,} output"
    )
    ratio = cache_hit_ratio(usage)
    hit = "n/a" if ratio is None else f"{ratio:.1%}"
    price = price_for(model, table)
    cost = "price unknown" if price is None else _format_usd(estimate_cost_usd(usage, price))
    return f"{tokens}\nCache hit ratio: {hit} · Estimated cost: {cost} ({model})"


def _format_usd(amount: float) -> str:
    """Cents for amounts of a dollar or more; four decimals below, where cents would read $0.00."""
    if amount >= 1:
        return f"${amount:,.2f}"
    return f"${amount:.4f}"
