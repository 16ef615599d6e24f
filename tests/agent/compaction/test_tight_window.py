"""Issue 31's "no churn at tight windows": at a window under 64K a compaction frees what ten
turns of growth ask for, down to the guarantees (and the head's old tool output), instead of
stopping at half the threshold."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.compaction.boundary import TailPolicy
from agent.compaction.headroom import (
    MAX_ROOM_SHARE,
    ROOM_TURNS,
    Aim,
    compaction_aims,
    max_room_share,
)
from agent.compaction.plan import CompactionPlan, Degrade, plan_compaction
from agent.compaction.prune import PRUNED_TOOL_OUTPUT
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
                clear_head=aim.clear_head,
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
    request) and the head without its first read, and leaves six."""
    messages = _session(9)
    assert sum(map(_measure, messages)) > THRESHOLD

    capped = compaction_aims(
        threshold_tokens=THRESHOLD, target_tokens=TARGET, growth_per_turn=GROWTH
    )
    tight = compaction_aims(
        threshold_tokens=THRESHOLD,
        target_tokens=TARGET,
        growth_per_turn=GROWTH,
        context_length=32_000,
    )
    assert tight[0] == Aim(
        limit_tokens=TARGET,
        min_level=Degrade.TAIL_SHRUNK,
        max_level=Degrade.TAIL_SHRUNK,
        clear_head=True,
    )
    before = _first_plan(messages, capped)
    after = _first_plan(messages, tight)
    assert before.level < Degrade.TAIL_SHRUNK and after.level == Degrade.TAIL_SHRUNK
    assert [m.get("role") for m in after.tail] == ["user", "assistant", "tool", "assistant"]
    assert after.tail[2]["content"] != PRUNED_TOOL_OUTPUT  # the newest read is a guarantee
    assert [m.get("content") for m in after.head if m.get("role") == "tool"] == [PRUNED_TOOL_OUTPUT]
    assert after.cleared_head == (messages[3],)  # archived with the middle, cited by anchor
    assert before.head[3]["content"] == messages[3]["content"]  # the capped plan kept it
    turns_left = (THRESHOLD - after.floor_tokens) // GROWTH
    assert (THRESHOLD - before.floor_tokens) // GROWTH == 4 and turns_left == 6


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
        context_length=32_000,
    )
    assert aims[-1] == Aim(limit_tokens=target, clear_head=True)
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
                clear_head=True,
            )
    else:
        assert aims == (Aim(limit_tokens=target, clear_head=True),)


@pytest.mark.parametrize("level", list(Degrade))
def test_the_head_read_is_cleared_only_from_the_shrunk_tail_on_and_only_when_asked(
    level: Degrade,
) -> None:
    """`clear_head` is a tight window's: a plan that keeps a verbatim or pruned tail, or any
    plan at a roomy window, keeps the head as it was."""
    messages = _session(9)
    policy = TailPolicy(tail_token_budget=int(THRESHOLD * 0.2))

    def head_tools(clear: bool) -> list[object]:
        plan = plan_compaction(
            messages,
            policy=policy,
            max_summary_tokens=1_600,
            limit_tokens=10**6,
            measure=_measure,
            min_level=level,
            max_level=level,
            clear_head=clear,
        )
        return [m.get("content") for m in plan.head if m.get("role") == "tool"]

    assert head_tools(False) in ([messages[3]["content"]], [])
    cleared = head_tools(True) == [PRUNED_TOOL_OUTPUT]
    assert cleared is (Degrade.TAIL_SHRUNK <= level < Degrade.GUARANTEES_FOLDED)
