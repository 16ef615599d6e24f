"""Does a micro fold's summary call pay for itself? Weighed in money, on two horizons.

On a route without a prompt cache every request pays for every token it carries, so a fold
pays when the input it takes out of the later requests (`fold_horizon_requests`: until the next
batch compaction) is worth more than its call. At a tight window the horizon is the net one
below, on either route.

At a tight window (`agent.compaction.headroom.is_tight_window`) a batch compaction comes every
few turns and lands `ROOM_TURNS` turns of growth below the threshold whatever the micro folds
did before it (`compaction_aims`). So a fold's saving is short-lived twice over: it takes its
exchange out of the requests only until that batch compaction, and it defers the compaction by
the tokens it saved over the session's growth, turns in which the requests run at the threshold
instead of the landing level. The net is `tight_fold_horizon_requests`: the requests until the
batch compaction less the `ROOM_TURNS` turns' worth of requests the deferral costs. In the
1,000-turn replay at 32K (seed 7, issue 31) folds ran at 59% occupancy on average, about three
turns before the batch compaction, with the compaction landing ten turns of growth below it: net
saving negative, and the 341 folds of the uncached route cost 482K more summarizer output than
the batch baseline (priced at 5x input) to bill 1% less input.

Prices are relative to one uncached input token, from the config's default table
(`agent.config._default_prices`, Anthropic list prices): output 15/3 = 5x
(`FOLD_OUTPUT_WEIGHT`), a cache read 0.30/3 = 0.1x (`CACHE_READ_RATIO`). A local model has no
price entry; the same ratios stand in for its decode and prefill time. Pure functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent.compaction.headroom import ROOM_TURNS
from agent.compaction.micro_cadence import FOLD_GROWTH_RATIO, FOLD_OUTPUT_WEIGHT, MAX_HORIZON_TURNS

__all__ = [
    "CACHED",
    "CACHE_READ_RATIO",
    "UNCACHED",
    "FoldPrices",
    "fold_pays",
    "tight_fold_horizon_requests",
]

CACHE_READ_RATIO = 0.1
"""A cache read's price over an uncached input token's (claude-sonnet: $0.30 / $3.00 per M)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldPrices:
    """Per-token prices relative to one uncached input token."""

    input: float = 1.0
    """The fold call's prompt."""
    output: float = FOLD_OUTPUT_WEIGHT
    """The fold call's output: the rolling summary rewritten."""
    carried: float = 1.0
    """One prompt token of a later request that the fold takes out: full price on a route
    without a prompt cache, a cache read on a cached route (the warm prefix it sits in)."""


UNCACHED = FoldPrices()
CACHED = FoldPrices(carried=CACHE_READ_RATIO)


def tight_fold_horizon_requests(
    *,
    tokens: int,
    threshold_tokens: int,
    growth_per_turn: float,
    requests_per_turn: float,
    room_turns: float = ROOM_TURNS,
) -> float:
    """The requests over which a fold at a tight window saves its exchange, net: the turns
    until the next batch compaction (room below the threshold over the growth per turn, at most
    `MAX_HORIZON_TURNS`) less the `room_turns` turns' worth the deferred compaction costs, in
    requests. Zero or less means the fold saves no input at all; 0 without growth to measure."""
    if threshold_tokens <= 0 or growth_per_turn <= 0:
        return 0.0
    left = max(0, threshold_tokens - tokens)
    turns = min(MAX_HORIZON_TURNS, left / growth_per_turn)
    return (turns - room_turns) * max(1.0, requests_per_turn)


def fold_pays(
    *,
    exchange_tokens: int,
    request_tokens: int,
    summary_tokens: int,
    scaffolding_tokens: int,
    horizon_requests: float,
    prices: FoldPrices,
) -> bool:
    """Whether the fold's call costs less than the input it saves over `horizon_requests`.

    Cost: the call's prompt (`request_tokens`) at the input price and its output (the rolling
    summary grown by `FOLD_GROWTH_RATIO` of the exchange) at the output price. Saving: per later
    request the exchange less that growth and the marker's fixed text (`scaffolding_tokens`, on
    a first fold), at the carried price. A fold that saves nothing, or has no horizon, never pays.
    """
    growth = math.ceil(exchange_tokens * FOLD_GROWTH_RATIO)
    saved_per_request = exchange_tokens - growth - scaffolding_tokens
    if saved_per_request <= 0 or horizon_requests <= 0:
        return False
    cost = request_tokens * prices.input + (summary_tokens + growth) * prices.output
    return saved_per_request * horizon_requests * prices.carried > cost
