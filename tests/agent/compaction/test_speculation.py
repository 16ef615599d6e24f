"""When to prepare a batch compaction ahead of the threshold, and when to swap it in."""

from __future__ import annotations

import pytest

from agent.compaction.speculation import Growth, should_adopt_batch, should_speculate


def test_growth_averages_turns_and_ignores_compactions() -> None:
    """Each turn's growth enters the average; a drop (a compaction) only moves the baseline."""
    growth = Growth().after_turn(1_000)
    assert growth.per_turn == 0 and growth.last_tokens == 1_000
    growth = growth.after_turn(3_000)
    assert growth.per_turn == 2_000
    growth = growth.after_turn(4_000)
    assert growth.per_turn == 1_500
    dropped = growth.after_turn(500)
    assert (dropped.per_turn, dropped.last_tokens) == (1_500, 500)


@pytest.mark.parametrize(
    ("tokens", "context_length", "expected"),
    [
        (19_500, 32_000, False),  # past 80% but a turn's growth stays under: not yet
        (21_000, 32_000, True),  # one turn's growth reaches the 24K threshold
        (19_500, 128_000, True),  # a roomy window prepares from 80%, as before
        (15_000, 128_000, True),  # ... or three turns ahead
        (15_000, 0, True),  # an unknown window is not tight
    ],
)
def test_a_tight_window_prepares_one_turn_ahead(
    tokens: int, context_length: int, expected: bool
) -> None:
    """At a window under 64K the turns appended after the snapshot stay verbatim when the
    compaction is swapped in, so it is prepared one turn ahead, not three (3,100 tokens a turn
    against a 24K threshold: the seed's coding session at 32K)."""
    growth = Growth(per_turn=3_100, last_tokens=tokens)
    assert (
        should_speculate(
            tokens=tokens,
            growth=growth,
            threshold_tokens=24_000,
            context_length=context_length,
        )
        is expected
    )


@pytest.mark.parametrize(
    ("tokens", "per_turn", "expected"),
    [
        (40_000, 50_000, False),  # below half the threshold: too little to summarize yet
        (60_000, 10_000, False),  # three turns away would be 90K: not yet
        (71_000, 10_000, True),  # three turns of growth reach the 100K threshold
        (79_000, 0, False),  # no growth seen, below 80%: wait
        (80_000, 0, True),  # past 80% of the threshold, whatever the growth
    ],
)
def test_prepare_once_the_threshold_is_a_few_turns_away(
    tokens: int, per_turn: float, expected: bool
) -> None:
    """A compaction is prepared when the session's growth says the threshold is near."""
    growth = Growth(per_turn=per_turn, last_tokens=tokens)
    assert should_speculate(tokens=tokens, growth=growth, threshold_tokens=100_000) is expected


@pytest.mark.parametrize(
    ("tokens", "incoming", "per_turn", "cold", "expected"),
    [
        (80_000, 1_000, 5_000, False, False),  # the coming turn stays under: keep the cache
        (80_000, 16_000, 5_000, False, True),  # a big paste would cross
        (90_000, 1_000, 10_000, False, True),  # a turn's growth would cross
        (60_000, 1_000, 5_000, True, True),  # cold cache: the swap is free now
        (40_000, 1_000, 5_000, True, False),  # ... but not this early
    ],
)
def test_adopt_when_the_coming_turn_would_cross_or_the_cache_is_cold(
    tokens: int, incoming: int, per_turn: float, cold: bool, expected: bool
) -> None:
    """A prepared compaction is swapped in late: when needed, or when it costs nothing."""
    assert (
        should_adopt_batch(
            tokens=tokens,
            incoming_tokens=incoming,
            growth=Growth(per_turn=per_turn),
            threshold_tokens=100_000,
            cache_cold=cold,
            context_length=128_000,
        )
        is expected
    )


@pytest.mark.parametrize(
    ("tokens", "cold", "expected"),
    [
        (20_500, False, True),  # 20,500 + 500 + 3,100 crosses the 24K threshold: due
        (17_500, False, False),  # warm: due a turn later
        (17_500, True, True),  # cold: the swap is free now, one turn early
        (13_000, True, False),  # ... but not three turns early, past half the threshold
    ],
)
def test_at_a_tight_window_a_cold_cache_brings_the_swap_one_turn_early_only(
    tokens: int, cold: bool, expected: bool
) -> None:
    """At 32K swapping in on any cold cache past half the threshold compacted every 2.9 turns
    (issue 31's replay, seed 7: 238 of 349 compactions were such swaps); there a cold cache
    brings it forward by one turn (`COLD_ADOPT_TURNS`)."""
    assert (
        should_adopt_batch(
            tokens=tokens,
            incoming_tokens=500,
            growth=Growth(per_turn=3_100),
            threshold_tokens=24_000,
            cache_cold=cold,
            context_length=32_000,
        )
        is expected
    )
