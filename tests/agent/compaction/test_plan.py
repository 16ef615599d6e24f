"""Planning: floor, degrade levels and refusal before any model call."""

from __future__ import annotations

import pytest

from agent.compaction.boundary import TailPolicy
from agent.compaction.plan import plan_compaction
from agent.compaction.prune import PRUNED_TOOL_OUTPUT
from agent.errors import CompactionRefused
from agent.messages import ChatMessage, assistant_message, system_message, user_message
from agent.tokens import estimate_message_tokens_rough
from tests.agent.compaction.transcripts import exchange

BIG = "z" * 8_000  # ~2,000 tokens


def _transcript() -> list[ChatMessage]:
    msgs = [system_message("sys"), user_message("start"), assistant_message("ok")]
    for _ in range(6):
        msgs += [user_message("go on " * 400), *exchange("read_file", BIG, path="a.py")]
    msgs += [user_message("last request"), *exchange("read_file", BIG, path="b.py")]
    return msgs


POLICY = TailPolicy(protect_first_n=3, tail_token_budget=100, protect_last_n=12)


@pytest.mark.parametrize(
    ("limit", "level", "detail"),
    [(100_000, 0, ""), (6_500, 1, "tail_pruned"), (4_700, 2, "tail_shrunk")],
)
def test_least_degraded_plan_that_fits(limit: int, level: int, detail: str) -> None:
    """Level 0 keeps the tail; then old tool output in the tail is cleared; then it shrinks."""
    msgs = _transcript()
    plan = plan_compaction(
        msgs,
        policy=POLICY,
        max_summary_tokens=2_000,
        limit_tokens=limit,
        measure=estimate_message_tokens_rough,
    )
    assert (plan.level, plan.detail) == (level, detail)
    assert plan.floor_tokens <= limit
    assert plan.tail[-2:] == msgs[-2:] and plan.tail[-1] is msgs[-1]  # newest exchange verbatim
    if level == 0:
        assert all(a is b for a, b in zip(plan.tail, msgs[-len(plan.tail) :], strict=True))
    else:
        assert any(m["content"] == PRUNED_TOOL_OUTPUT for m in plan.tail)


def test_middle_is_pruned_but_original_kept_for_local_summary() -> None:
    """The summarizer sees cleared tool output; the local summary sees the original."""
    plan = plan_compaction(
        _transcript(),
        policy=POLICY,
        max_summary_tokens=2_000,
        limit_tokens=10**6,
        measure=estimate_message_tokens_rough,
    )
    assert any(m["content"] == PRUNED_TOOL_OUTPUT for m in plan.middle)
    assert all(m["content"] != PRUNED_TOOL_OUTPUT for m in plan.middle_original)
    assert plan.pruned_count >= 1


def test_floor_too_high_is_refused_with_numbers() -> None:
    """If even the shrunk tail cannot fit, the plan is refused and says how many tokens."""
    with pytest.raises(CompactionRefused, match=r"needs \d+ tokens"):
        plan_compaction(
            _transcript(),
            policy=POLICY,
            max_summary_tokens=2_000,
            limit_tokens=3_000,
            measure=estimate_message_tokens_rough,
        )
