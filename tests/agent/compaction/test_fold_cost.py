"""A micro fold at a tight window weighed in money (`agent.compaction.fold_cost`), and the
stopgap upgrade skipped there (`agent.stopgap.upgrade_pays`). Contract: issue 31's done-when,
the default mode's billed input and cost at most the batch baseline's at 32K on both routes."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import cast

from hypothesis import given
from hypothesis import strategies as st

from agent.compaction.fold_cost import (
    CACHE_READ_RATIO,
    CACHED,
    UNCACHED,
    FoldPrices,
    fold_pays,
    tight_fold_horizon_requests,
)
from agent.compaction.headroom import ROOM_TURNS, TIGHT_WINDOW_TOKENS
from agent.compaction.markers import make_summary_marker
from agent.compaction.micro_cadence import (
    FOLD_GROWTH_RATIO,
    FOLD_OUTPUT_WEIGHT,
    fold_horizon_requests,
)
from agent.config import HermesConfig
from agent.context_engine import ContextEngine
from agent.stopgap import StopgapUpgrade, upgrade_pays

small = st.integers(min_value=0, max_value=20_000)
horizon = st.floats(min_value=-500.0, max_value=500.0, allow_nan=False)
price = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


def test_the_default_prices_are_the_sonnet_list_prices_relative_to_input() -> None:
    """The ratios the rule uses are the config table's claude-sonnet entry: output 5x input, a
    cache read a tenth of it. If the table changes, the constants must follow."""
    sonnet = HermesConfig().pricing["claude-sonnet"]
    assert sonnet.output / sonnet.input == FOLD_OUTPUT_WEIGHT == UNCACHED.output == CACHED.output
    assert math.isclose(sonnet.cache_read / sonnet.input, CACHE_READ_RATIO)
    assert UNCACHED.carried == 1.0 and CACHED.carried == CACHE_READ_RATIO


@given(
    exchange=small,
    fixed=small,
    summary=small,
    scaffolding=small,
    requests=horizon,
    input_price=price,
    output_price=price,
    carried=price,
)
def test_a_fold_pays_when_the_input_it_saves_is_worth_more_than_its_call(
    exchange: int,
    fixed: int,
    summary: int,
    scaffolding: int,
    requests: float,
    input_price: float,
    output_price: float,
    carried: float,
) -> None:
    """Call: prompt at the input price, output (the summary grown by the fold) at the output
    price. Saving: the exchange less that growth and the marker, per request of the horizon, at
    the carried price. No horizon (zero or negative) or no saving: never."""
    prices = FoldPrices(input=input_price, output=output_price, carried=carried)
    growth = math.ceil(exchange * FOLD_GROWTH_RATIO)
    saved = exchange - growth - scaffolding
    call = (fixed + exchange) * input_price + (summary + growth) * output_price
    expected = saved > 0 and requests > 0 and saved * requests * carried > call
    got = fold_pays(
        exchange_tokens=exchange,
        request_tokens=fixed + exchange,
        summary_tokens=summary,
        scaffolding_tokens=scaffolding,
        horizon_requests=requests,
        prices=prices,
    )
    assert got == expected


@given(exchange=small, fixed=small, summary=small, scaffolding=small, requests=horizon)
def test_a_cached_route_never_folds_what_the_uncached_one_would_not(
    exchange: int, fixed: int, summary: int, scaffolding: int, requests: float
) -> None:
    """The tokens a fold takes out of a warm prefix would have been cache reads: a tenth of the
    saving, the same call. Uncached, the default prices weigh output at `FOLD_OUTPUT_WEIGHT`."""

    def pays(prices: FoldPrices) -> bool:
        return fold_pays(
            exchange_tokens=exchange,
            request_tokens=fixed + exchange,
            summary_tokens=summary,
            scaffolding_tokens=scaffolding,
            horizon_requests=requests,
            prices=prices,
        )

    if pays(CACHED):
        assert pays(UNCACHED)
    assert UNCACHED == FoldPrices(input=1.0, output=FOLD_OUTPUT_WEIGHT, carried=1.0)


@given(
    threshold=st.integers(min_value=1_000, max_value=60_000),
    growth=st.floats(min_value=1.0, max_value=20_000.0, allow_nan=False),
    per_turn=st.floats(min_value=0.0, max_value=30.0, allow_nan=False),
    share=st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
)
def test_below_the_landing_room_a_tight_fold_saves_nothing(
    threshold: int, growth: float, per_turn: float, share: float
) -> None:
    """Anywhere between the level a batch compaction lands at (`ROOM_TURNS` turns of growth
    below the threshold, `compaction_aims`) and the threshold, the net horizon is none: the
    requests the fold saves on before the compaction, the deferred compaction spends again."""
    landing = max(0.0, threshold - ROOM_TURNS * growth)
    tokens = math.ceil(landing + share * (threshold - landing))
    got = tight_fold_horizon_requests(
        tokens=tokens,
        threshold_tokens=threshold,
        growth_per_turn=growth,
        requests_per_turn=per_turn,
    )
    assert got <= 0
    plain = fold_horizon_requests(
        tokens=tokens,
        threshold_tokens=threshold,
        growth_per_turn=growth,
        requests_per_turn=per_turn,
    )
    assert got < plain


def test_the_replays_mean_fold_paid_by_the_old_rule_and_does_not_by_the_new() -> None:
    """Issue 31's 32K replay (seed 7, uncached route): folds at 59% of a 24K threshold, 2,344
    tokens an exchange on average, some 3,100 tokens of growth and 3.1 requests a turn, a
    ~700-token rolling summary. The plain horizon (~7 requests) let it run 341 times; net of
    the deferred compaction it saves nothing, on either route."""
    plain, net = (
        horizon_of(
            tokens=14_160, threshold_tokens=24_000, growth_per_turn=3_100.0, requests_per_turn=3.1
        )
        for horizon_of in (fold_horizon_requests, tight_fold_horizon_requests)
    )
    assert 6 < plain < 11 and net < 0
    assert fold_pays(
        exchange_tokens=2_344,
        request_tokens=2_344 + 500,
        summary_tokens=700,
        scaffolding_tokens=0,
        horizon_requests=plain,
        prices=UNCACHED,
    )
    for prices in (UNCACHED, CACHED):
        assert not fold_pays(
            exchange_tokens=2_344,
            request_tokens=2_344 + 500,
            summary_tokens=700,
            scaffolding_tokens=0,
            horizon_requests=net,
            prices=prices,
        )


def test_a_stopgap_is_upgraded_only_where_the_window_is_not_tight() -> None:
    """At a tight window the next batch compaction replaces the stopgap within a few turns;
    elsewhere (and with the window unknown) the model's summary is worth its call."""
    assert not upgrade_pays(32_000)
    assert not upgrade_pays(TIGHT_WINDOW_TOKENS - 1)
    assert upgrade_pays(TIGHT_WINDOW_TOKENS)
    assert upgrade_pays(128_000)
    assert upgrade_pays(0)


def test_an_offered_upgrade_is_dropped_at_a_tight_window() -> None:
    """`StopgapUpgrade.offer` keeps the upgrade pending only where `upgrade_pays`."""

    async def upgrade() -> str:
        return "the model's summary"

    marker = make_summary_marker("stopgap", "user")
    for window, pending in ((32_000, False), (128_000, True)):
        work = StopgapUpgrade()
        work.offer(marker, upgrade, cast(ContextEngine, SimpleNamespace(context_length=window)))
        assert work.pending is pending
