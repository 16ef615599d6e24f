"""Issue 31's pure decisions: a fold pays over its horizon, a compaction frees ten turns' room,
and a single-slot server makes background work yield. Properties over generated values."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from agent.compaction.fold_cost import UNCACHED, fold_pays
from agent.compaction.headroom import (
    MAX_ROOM_SHARE,
    ROOM_TURNS,
    compaction_aims,
    recent_growth_per_turn,
)
from agent.compaction.micro_cadence import (
    FOLD_GROWTH_RATIO,
    FOLD_OUTPUT_WEIGHT,
    MAX_HORIZON_TURNS,
    fold_horizon_requests,
    requests_per_turn,
)
from agent.compaction.plan import Degrade
from agent.messages import assistant_message, system_message, user_message
from agent.server_slot import resolve_concurrency

tokens = st.integers(min_value=0, max_value=200_000)
small = st.integers(min_value=0, max_value=20_000)
horizon = st.floats(min_value=0.0, max_value=500.0, allow_nan=False)


def _pays(exchange: int, fixed: int, summary: int, scaffolding: int, requests: float) -> bool:
    return fold_pays(
        exchange_tokens=exchange,
        request_tokens=fixed + exchange,
        summary_tokens=summary,
        scaffolding_tokens=scaffolding,
        horizon_requests=requests,
        prices=UNCACHED,
    )


@given(exchange=small, fixed=small, summary=small, scaffolding=small, requests=horizon)
def test_a_fold_runs_only_when_its_saving_over_the_horizon_exceeds_its_call(
    exchange: int, fixed: int, summary: int, scaffolding: int, requests: float
) -> None:
    """Saved: the exchange less the summary's growth and the marker, on every request of the
    horizon. Cost: the call's prompt, and its output (the whole rolling summary rewritten) at
    the output weight. A fold that pays saves more than it costs; one that does not, less."""
    growth = math.ceil(exchange * FOLD_GROWTH_RATIO)
    saved = (exchange - growth - scaffolding) * requests
    cost = fixed + exchange + FOLD_OUTPUT_WEIGHT * (summary + growth)
    assert _pays(exchange, fixed, summary, scaffolding, requests) == (
        exchange - growth - scaffolding > 0 and saved > cost
    )


@given(exchange=small, fixed=small, summary=small, scaffolding=small)
def test_a_fold_never_pays_within_a_few_requests(
    exchange: int, fixed: int, summary: int, scaffolding: int
) -> None:
    """Within 3 requests no fold can pay: its own prompt and the summary growth it writes
    already cost more than the exchange it takes out of them (the old cadence folded anyway)."""
    assert not _pays(exchange, fixed, summary, scaffolding, 3.0)


@given(
    exchange=small,
    fixed=small,
    summary=small,
    scaffolding=small,
    requests=horizon,
    more=horizon,
)
def test_a_longer_horizon_never_turns_a_paying_fold_down(
    exchange: int, fixed: int, summary: int, scaffolding: int, requests: float, more: float
) -> None:
    if _pays(exchange, fixed, summary, scaffolding, requests):
        assert _pays(exchange, fixed, summary, scaffolding, requests + more)


@given(
    now=tokens,
    threshold=tokens,
    growth=st.floats(min_value=0.0, max_value=50_000.0, allow_nan=False),
    per_turn=st.floats(min_value=0.0, max_value=30.0, allow_nan=False),
    extra=tokens,
)
def test_the_horizon_is_the_requests_until_the_next_batch_compaction(
    now: int, threshold: int, growth: float, per_turn: float, extra: int
) -> None:
    """At least one request, at most `MAX_HORIZON_TURNS` turns of requests; shorter the nearer
    the threshold (a fold just before a batch compaction saves almost nothing)."""
    got = fold_horizon_requests(
        tokens=now, threshold_tokens=threshold, growth_per_turn=growth, requests_per_turn=per_turn
    )
    assert 1.0 <= got <= MAX_HORIZON_TURNS * max(1.0, per_turn)
    later = fold_horizon_requests(
        tokens=now + extra,
        threshold_tokens=threshold,
        growth_per_turn=growth,
        requests_per_turn=per_turn,
    )
    assert later <= got
    if threshold > 0 and now >= threshold:
        assert got == max(1.0, per_turn) or got == 1.0


def test_requests_per_turn_counts_each_assistant_message_as_one_request() -> None:
    """A turn of three tool rounds and an answer is four requests; no turn yet counts as one."""
    assert requests_per_turn(["user", "assistant", "assistant", "assistant", "assistant"]) == 4
    assert requests_per_turn(["user", "assistant", "user", "assistant", "assistant"]) == 1.5
    assert requests_per_turn([]) == 1.0


def test_a_fold_near_the_threshold_waits_where_the_same_fold_early_runs() -> None:
    """The cadence by cost, on an uncached route: a 2,000-token exchange, a 1,500-token rolling
    summary, 3.5 requests a turn, 2,500 tokens of growth a turn, a 96K threshold."""

    def pays_at(now: int) -> bool:
        requests = fold_horizon_requests(
            tokens=now, threshold_tokens=96_000, growth_per_turn=2_500, requests_per_turn=3.5
        )
        return _pays(2_000, 1_200, 1_500, 0, requests)

    assert pays_at(40_000)  # 22 turns to go: ~78 requests carry it
    assert not pays_at(93_000)  # a turn or so to go: the call costs more than it saves


@given(
    threshold=st.integers(min_value=1_000, max_value=400_000),
    growth=st.floats(min_value=0.0, max_value=100_000.0, allow_nan=False),
)
def test_aims_ask_for_ten_turns_of_room_at_most_half_the_threshold(
    threshold: int, growth: float
) -> None:
    """The first aim leaves `ROOM_TURNS` turns of growth below the threshold (capped at half of
    it) without cutting the guarantees; the last is always the usual target, fully degradable."""
    target = int(threshold * 0.85)
    aims = compaction_aims(threshold_tokens=threshold, target_tokens=target, growth_per_turn=growth)
    assert aims[-1].limit_tokens == target and aims[-1].max_level == Degrade.GUARANTEES_FOLDED
    room = min(math.ceil(ROOM_TURNS * growth), int(threshold * MAX_ROOM_SHARE))
    if threshold - room < target:
        first = aims[0]
        assert first.limit_tokens == threshold - room
        assert first.max_level == Degrade.TAIL_SHRUNK
        assert all(a.max_level <= Degrade.TAIL_SHRUNK for a in aims[:-1])
    else:
        assert len(aims) == 1


def test_recent_growth_is_measured_from_the_newest_turns_of_the_transcript() -> None:
    """Tokens from the oldest of the newest five user messages to the end, per turn."""
    transcript = [system_message("s" * 400)]
    for size in (1_000, 100, 100, 100, 100, 100):
        transcript += [user_message("u" * 40), assistant_message("a" * 4 * size)]
    growth = recent_growth_per_turn(transcript, lambda m: len(str(m.get("content"))) // 4)
    assert growth == (5 * 10 + 5 * 100) / 5  # the 1,000-token turn is six turns back
    assert recent_growth_per_turn([system_message("s")], lambda m: 1) == 0.0


def test_the_server_is_single_slot_for_a_local_provider_unless_told() -> None:
    """`model.concurrency` unset: 1 for `custom`, no limit for hosted; a summarizer on a server
    of its own never yields."""
    assert resolve_concurrency(None, provider="custom", shares_server=True) == 1
    assert resolve_concurrency(None, provider="anthropic", shares_server=True) is None
    assert resolve_concurrency(4, provider="custom", shares_server=True) == 4
    assert resolve_concurrency(1, provider="anthropic", shares_server=True) == 1
    assert resolve_concurrency(1, provider="custom", shares_server=False) is None
