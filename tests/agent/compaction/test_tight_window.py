"""Issue 31's "no churn at tight windows": at a window under 64K a compaction frees what ten
turns of growth ask for, down to the guarantees, instead of stopping at half the threshold."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.compaction.boundary import TailPolicy
from agent.compaction.headroom import (
    MAX_ROOM_SHARE,
    ROOM_TURNS,
    TIGHT_ROOM_SHARE,
    Aim,
    compaction_aims,
    max_room_share,
)
from agent.compaction.plan import CompactionPlan, Degrade, plan_compaction
from agent.errors import CompactionRefused
from agent.messages import ChatMessage, assistant_message, system_message, user_message
from tests.agent.compaction.transcripts import exchange

THRESHOLD = 24_000
"""The threshold at a 32K window (the small-window floor: 0.75)."""
TARGET = int(THRESHOLD * 0.85)
GROWTH = 3_100
"""Tokens a turn adds in the seed's coding session at 32K (replay, seed 7: mean 2,991 a turn
after its micro folds; explore 3,358, implement 3,697, test 3,231, paste 8,127)."""


def _measure(msg: ChatMessage) -> int:
    return len(str(msg.get("content") or "")) // 4 + 4


def _session(turns: int) -> list[ChatMessage]:
    """A coding session: each turn a question, a read of ~1,500 tokens, an answer with code of
    ~1,300 (growth as the replay's: a turn's tool output and the reply's text)."""
    msgs: list[ChatMessage] = [system_message("You are a coding agent. " * 20)]
    for turn in range(turns):
        msgs.append(user_message(f"turn {turn}: look at module {turn} and fix it"))
        msgs += exchange("read_file", f"# module {turn}\n" + "x = compute(y)\n" * 400, path="m.py")
        msgs.append(assistant_message(f"module {turn} fixed: " + "a change. " * 520))
    return msgs


def _first_plan(messages: Sequence[ChatMessage], aims: Sequence[Aim]) -> CompactionPlan:
    """The plan a pass takes: the first aim a plan reaches (`ContextCompressor._plan`)."""
    policy = TailPolicy(tail_token_budget=int(THRESHOLD * 0.2))
    for aim in aims:
        try:
            return plan_compaction(
                messages,
                policy=policy,
                max_summary_tokens=1_600,
                limit_tokens=aim.limit_tokens,
                measure=_measure,
                min_level=aim.min_level,
                max_level=aim.max_level,
            )
        except CompactionRefused:
            continue
    raise AssertionError("the last aim always plans here")


@pytest.mark.parametrize(
    ("context_length", "share"),
    [(0, MAX_ROOM_SHARE), (8_192, 1.0), (32_000, 1.0), (63_999, 1.0), (64_000, 0.5)],
)
def test_the_room_share_cap_is_lifted_only_at_a_tight_window(
    context_length: int, share: float
) -> None:
    """Half the threshold at 128K is ten turns and more; at 32K it is three or four."""
    assert max_room_share(context_length) == share
    assert max_room_share(128_000) == MAX_ROOM_SHARE


def test_at_32k_a_pass_lands_at_the_guarantees_and_leaves_room_for_more_turns() -> None:
    """Ten turns of 3,100 tokens are more than the 24K threshold: out of reach. A pass capped
    at half of it keeps a tail of the last turns (their tool output cleared) and leaves room for
    four turns; at a tight window it keeps only the guarantees (the newest exchange, the last
    request) and leaves five."""
    messages = _session(9)
    assert sum(map(_measure, messages)) > THRESHOLD

    capped = compaction_aims(
        threshold_tokens=THRESHOLD, target_tokens=TARGET, growth_per_turn=GROWTH
    )
    tight = compaction_aims(
        threshold_tokens=THRESHOLD,
        target_tokens=TARGET,
        growth_per_turn=GROWTH,
        room_share=max_room_share(32_000),
    )
    assert tight[0] == Aim(
        limit_tokens=TARGET, min_level=Degrade.TAIL_SHRUNK, max_level=Degrade.TAIL_SHRUNK
    )
    before = _first_plan(messages, capped)
    after = _first_plan(messages, tight)
    assert before.level < Degrade.TAIL_SHRUNK and after.level == Degrade.TAIL_SHRUNK
    assert [m.get("role") for m in after.tail] == ["user", "assistant", "tool", "assistant"]
    turns_left = (THRESHOLD - after.floor_tokens) // GROWTH
    assert (THRESHOLD - before.floor_tokens) // GROWTH == 4 and turns_left == 5


@given(
    threshold=st.integers(min_value=1_000, max_value=400_000),
    growth=st.floats(min_value=0.0, max_value=100_000.0, allow_nan=False),
)
def test_a_tight_window_asks_for_ten_turns_but_never_past_the_guarantees(
    threshold: int, growth: float
) -> None:
    """With the cap lifted the room aim asks for all ten turns (the whole threshold at most);
    no aim but the last (the never-brick one) may cut into the guarantees."""
    target = int(threshold * 0.85)
    aims = compaction_aims(
        threshold_tokens=threshold,
        target_tokens=target,
        growth_per_turn=growth,
        room_share=TIGHT_ROOM_SHARE,
    )
    assert aims[-1] == Aim(limit_tokens=target)
    assert all(a.max_level <= Degrade.TAIL_SHRUNK for a in aims[:-1])
    wanted = min(-(-ROOM_TURNS * growth // 1), threshold)
    if threshold - wanted < target:
        assert aims[0].max_level == Degrade.TAIL_SHRUNK
        if threshold - wanted > 0:
            assert aims[0].limit_tokens == threshold - wanted
        else:  # no plan leaves the whole threshold free: the guarantees are the most room
            assert aims[0] == Aim(
                limit_tokens=target,
                min_level=Degrade.TAIL_SHRUNK,
                max_level=Degrade.TAIL_SHRUNK,
            )
    else:
        assert aims == (Aim(limit_tokens=target),)
