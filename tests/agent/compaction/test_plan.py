"""Planning: floor, degrade levels and refusal before any model call."""

from __future__ import annotations

import pytest

from agent.compaction.boundary import TailPolicy
from agent.compaction.plan import plan_compaction
from agent.compaction.prune import PRUNED_TOOL_OUTPUT
from agent.errors import CompactionRefused
from agent.messages import (
    ChatMessage,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)
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
    """If even the allowed degrade levels cannot fit, the plan is refused and says how many
    tokens what it must keep needs."""
    with pytest.raises(CompactionRefused, match=r"needs [\d,]+ tokens"):
        plan_compaction(
            _transcript(),
            policy=POLICY,
            max_summary_tokens=2_000,
            limit_tokens=3_000,
            measure=estimate_message_tokens_rough,
            max_level=2,
        )


def test_a_message_larger_than_the_window_is_named_in_one_sentence() -> None:
    """Nothing can make room for a single user message larger than the window: the refusal
    says so, with its size, so the person knows what to change."""
    msgs = [system_message("sys"), user_message("start"), assistant_message("ok")]
    msgs += [user_message("huge " * 4_000)]
    with pytest.raises(CompactionRefused, match=r"last message is about [\d,]+ tokens.*smaller"):
        plan_compaction(
            msgs,
            policy=POLICY,
            max_summary_tokens=2_000,
            limit_tokens=3_000,
            measure=estimate_message_tokens_rough,
        )


def _bricked() -> list[ChatMessage]:
    """Issue 14's transcript: a turn read three ~5,000-token files at once and overflowed; the
    user then wrote again. The reads sit in the head (it grows over trailing tool results)."""
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for i in range(3)
    ]
    msgs = [system_message("sys"), user_message("read the logs"), assistant_message(None, calls)]
    msgs += [tool_message(f"c{i}", "read_file", f"log {i} " + "x" * 20_000) for i in range(3)]
    return [*msgs, user_message("what did they say?")]


def test_reads_the_session_must_keep_are_cut_to_fit() -> None:
    """Degrade level 3: what would otherwise be refused ("the protected tail reaches the head")
    cuts the tool outputs it must keep to what fits, each keeping its head and tail."""
    msgs = _bricked()
    plan = plan_compaction(
        msgs,
        policy=POLICY,
        max_summary_tokens=500,
        limit_tokens=9_000,
        measure=estimate_message_tokens_rough,
    )
    assert (plan.level, plan.detail) == (3, "guarantees_cut")
    assert plan.floor_tokens <= 9_000 and plan.middle == []
    kept = [*plan.head, *plan.tail]
    cut = [m for m in kept if "were cut to fit" in str(m.get("content"))]
    assert [m["tool_call_id"] for m in cut] == ["c0", "c1", "c2"]
    assert all(str(m["content"]).startswith(f"log {i} ") for i, m in enumerate(cut))
    assert kept[-1] is msgs[-1]  # the newest request verbatim


def test_the_last_resort_folds_an_exchange_older_than_the_request() -> None:
    """Degrade level 4: when even cut outputs do not fit, everything before the last request
    (past the head) goes into the summary; the request itself stays verbatim."""
    msgs = [system_message("sys"), user_message("start"), assistant_message("ok")]
    msgs += [user_message("write an essay"), assistant_message("essay " * 6_000)]
    msgs += [user_message("shorter please")]
    plan = plan_compaction(
        msgs,
        policy=POLICY,
        max_summary_tokens=500,
        limit_tokens=2_000,
        measure=estimate_message_tokens_rough,
    )
    assert (plan.level, plan.detail) == (4, "guarantees_folded")
    assert plan.tail == [msgs[-1]] and msgs[-2] in plan.middle
