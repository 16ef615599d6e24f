"""Micro-compaction's pure rules: cadence, defrag, failures, cursor, exchange and splices."""

from __future__ import annotations

import pytest

from agent.compaction.boundary import TailPolicy
from agent.compaction.markers import is_micro_marker, make_summary_marker, parse_summary_marker
from agent.compaction.micro_cadence import (
    FailureState,
    after_failure,
    decide_cadence,
    defrag_rejection,
    occupancy_pct,
    should_defrag,
)
from agent.compaction.micro_cursor import (
    find_exchange,
    first_divergence,
    locate_cursor,
    marker_role,
    splice_exchange,
    view_transcript,
)
from agent.messages import assistant_message, system_message, user_message
from tests.agent.compaction.transcripts import exchange, persisted


@pytest.mark.parametrize(
    ("when", "last", "ttl", "tokens", "run", "reason"),
    [
        ("always", 999.0, 300.0, 0, True, "always"),
        ("cold", 999.0, None, 0, True, "no_cache"),
        ("cold", None, 300.0, 0, True, "cold"),
        ("cold", 600.0, 300.0, 0, True, "cold"),
        ("cold", 800.0, 300.0, 59, False, "warm"),
        ("cold", 800.0, 300.0, 60, True, "occupancy"),
    ],
)
def test_cadence(when, last, ttl, tokens, run, reason) -> None:  # type: ignore[no-untyped-def]
    """Runs when always, uncached, idle past the TTL or past the occupancy trigger; else waits."""
    got = decide_cadence(
        when=when,
        now=1000.0,
        last_request_at=last,
        cache_ttl_s=ttl,
        tokens=tokens,
        threshold_tokens=100,
        occupancy_trigger=0.6,
    )
    assert (got.run, got.reason) == (run, reason)


def test_defrag_and_occupancy_rules() -> None:
    """Defrag past the size and the backoff floor; occupancy null while the window is unknown."""
    assert should_defrag(2001, 2000, 0) and not should_defrag(2001, 2000, 2500)
    assert occupancy_pct(50, 200, 1000) == 25.0 and occupancy_pct(50, 200, 0) is None


@pytest.mark.parametrize(
    ("new", "old", "covered", "why"),
    [
        (85, 100, 1.0, None),
        (86, 100, 1.0, "not_smaller"),  # judged on the old summary alone ...
        (100, 100, 1.0, "not_smaller"),  # ... so a 1:1 rewrite is never kept,
        (400, 100, 1.0, "not_smaller"),  # however large the middle it claims to absorb
        (50, 100, 0.49, "middle_dropped"),  # smaller, but the middle is no longer named
        (50, 100, 0.5, None),
    ],
)
def test_defrag_is_judged_on_the_summary_alone(
    new: int, old: int, covered: float, why: str | None
) -> None:
    """A defrag is kept only at <= 85% of the old summary and with the middle still named."""
    got = defrag_rejection(new_summary_tokens=new, old_summary_tokens=old, middle_coverage=covered)
    assert got == why


def test_three_failures_on_one_exchange_skip_it() -> None:
    """The third consecutive failure on the same exchange says skip; another exchange restarts."""
    state, skip = after_failure(FailureState(), 7)
    state, skip2 = after_failure(state, 8)
    state, skip3 = after_failure(state, 8)
    state, skip4 = after_failure(state, 8)
    assert (skip, skip2, skip3, skip4) == (False, False, False, True)
    assert state.count == 0 and state.total == 4


@pytest.mark.parametrize(
    ("prev", "nxt", "role"),
    [
        ("user", "user", "assistant"),
        ("user", "assistant", "user"),
        (None, "user", "assistant"),
        ("assistant", "assistant", "user"),
        (None, None, "user"),
    ],
)
def test_marker_role(prev, nxt, role) -> None:  # type: ignore[no-untyped-def]
    """Unlike both neighbours when possible, else unlike the next message."""
    p = {"role": prev} if prev else None
    n = {"role": nxt} if nxt else None
    assert marker_role(p, n) == role  # type: ignore[arg-type]


def _transcript() -> list:
    msgs = [system_message("sys"), user_message("u0"), assistant_message("a0")]
    for i in range(1, 6):
        msgs += [user_message(f"u{i}"), *exchange("read", "out" * 50), assistant_message(f"a{i}")]
    return persisted(msgs)


def test_fold_walks_past_users_and_keeps_one_marker() -> None:
    """The exchange after the cursor is replaced by one marker; users stay; the old marker goes."""
    msgs = _transcript()
    policy = TailPolicy(protect_first_n=3, tail_token_budget=10, protect_last_n=4)
    view = view_transcript(msgs, [10] * len(msgs), policy)
    assert view is not None and view.marker_index is None
    cursor = locate_cursor(msgs, view, None)
    ex = find_exchange(msgs, cursor, view.tail_start)
    assert ex is not None and (ex.start, ex.end) == (4, 6)  # past u1: the call and its result
    new, cursor = splice_exchange(msgs, view, ex, "s1")
    assert is_micro_marker(new[4]) and cursor == 5 and new[3]["content"] == "u1"
    assert first_divergence(msgs, new) == 4
    new[4]["_id"] = 99
    view2 = view_transcript(new, [10] * len(new), policy)
    assert view2 is not None and view2.marker_index == 4 and view2.summary == "s1"
    assert locate_cursor(new, view2, None) == 5 and locate_cursor(new, view2, 99) == 5
    ex2 = find_exchange(new, 5, view2.tail_start)
    new2, _ = splice_exchange(new, view2, ex2, "s2")  # type: ignore[arg-type]
    assert sum(is_micro_marker(m) for m in new2) == 1
    assert [m["content"] for m in new2 if m.get("role") == "user" and m.get("_kind") != "summary"]
    assert parse_summary_marker(next(m for m in new2 if is_micro_marker(m))) == "s2"


def test_region_starts_after_a_batch_marker() -> None:
    """A batch marker is never touched: the micro region and cursor begin after it."""
    msgs = _transcript()
    msgs.insert(3, make_summary_marker("batch", "user"))
    policy = TailPolicy(protect_first_n=3, tail_token_budget=10, protect_last_n=4)
    view = view_transcript(msgs, [10] * len(msgs), policy)
    assert view is not None and view.region_start == 4 and view.marker_index is None
    assert locate_cursor(msgs, view, 12345) == 4  # an unknown anchor: recovered
