"""Phase 2 boundary selection: head, tail, guarantees and the marker role."""

from __future__ import annotations

import pytest

from agent.compaction.boundary import (
    TailPolicy,
    budget_tail_start,
    guarantee_start,
    head_end,
    pick_summary_role,
    select_boundaries,
)
from agent.compaction.markers import make_summary_marker
from agent.errors import CompactionRefused
from agent.messages import ChatMessage, assistant_message, system_message, user_message
from tests.agent.compaction.transcripts import exchange


def _roles(spec: str) -> list[ChatMessage]:
    """s=system u=user a=assistant text, c+t = a call and its result, m = summary marker."""
    out: list[ChatMessage] = []
    for ch in spec:
        if ch == "s":
            out.append(system_message("sys"))
        elif ch == "u":
            out.append(user_message("u"))
        elif ch == "a":
            out.append(assistant_message("a"))
        elif ch == "c":
            out.extend(exchange("t", "r"))
        elif ch == "m":
            out.append(make_summary_marker("old", "user"))
    return out


@pytest.mark.parametrize(
    ("spec", "first_n", "expected"),
    [
        ("sua", 3, 3),
        ("suc", 3, 4),  # grows over the first exchange's result
        ("sucu", 3, 4),
        ("su", 3, 2),
        ("suam", 5, 3),  # a marker never belongs to the head
        ("sua", 1, 1),
    ],
)
def test_head_end(spec: str, first_n: int, expected: int) -> None:
    """The head keeps `protect_first_n` messages, whole tool groups, and no marker."""
    assert head_end(_roles(spec), first_n) == expected


@pytest.mark.parametrize(
    ("spec", "min_users", "expected"),
    [
        ("suaua", 1, 3),  # last user at 3
        ("suauaua", 2, 3),  # two users: 3 and 5
        ("suacccc", 1, 9),  # user only in head: newest exchange (assistant at 9)
        ("suauccc", 1, 3),
        ("suauacu", 1, 5),  # newest exchange starts before the last user
        ("suauau", 0, 4),  # min 0 still keeps the last user and the newest exchange
    ],
)
def test_guarantee_start(spec: str, min_users: int, expected: int) -> None:
    """The tail may start no later than the last user(s) after the head and the newest exchange."""
    msgs = _roles(spec)
    assert guarantee_start(msgs, head_end(msgs, 3), min_users) == expected


@pytest.mark.parametrize(
    ("tokens", "budget", "expected"),
    [
        ([10, 10, 10, 10], 25, 2),
        ([10, 10, 10, 50], 25, 4),
        ([10, 10, 10, 10], 100, 1),  # never below lo=1
    ],
)
def test_budget_tail_start(tokens: list[int], budget: int, expected: int) -> None:
    """Walk back from the end while the suffix fits the budget."""
    assert budget_tail_start(tokens, budget, 1) == expected


@pytest.mark.parametrize(
    ("prev", "nxt", "expected"),
    [
        ("assistant", "assistant", "user"),
        ("assistant", None, "user"),
        ("user", "user", "assistant"),
        (None, "user", "assistant"),
        (None, None, "user"),
        ("user", "assistant", None),
        ("assistant", "user", None),
    ],
)
def test_pick_summary_role(prev: str | None, nxt: str | None, expected: str | None) -> None:
    """The marker's role differs from both chat-role neighbours, or none fits."""
    assert pick_summary_role(prev, nxt) == expected


def _policy(**kw: object) -> TailPolicy:
    base: dict[str, object] = {"protect_first_n": 3, "tail_token_budget": 0, "protect_last_n": 1}
    base.update(kw)
    return TailPolicy(**base)  # type: ignore[arg-type]


def test_tail_is_aligned_to_the_parent_assistant() -> None:
    """A tail that would start on a tool result starts at its assistant message instead."""
    msgs = _roles("suauacccu")  # 5 c, 6 t, 7 c, 8 t, 9 c, 10 t, 11 u
    b = select_boundaries(msgs, [1] * len(msgs), _policy(protect_last_n=4))
    assert b.tail_start == 7 and msgs[7]["role"] == "assistant"


def test_legacy_keeps_protect_last_n_lean_uses_budget_only() -> None:
    """Legacy falls back to protect_last_n; lean keeps only the token budget and guarantees."""
    msgs = _roles("sua" + "ua" * 10)
    tokens = [1] * len(msgs)
    legacy = select_boundaries(msgs, tokens, _policy(protect_last_n=8))
    lean = select_boundaries(msgs, tokens, _policy(protect_last_n=8, tail_mode="lean"))
    assert len(msgs) - legacy.tail_start >= 8
    assert len(msgs) - lean.tail_start < 8


def test_role_collision_extends_the_tail_backward() -> None:
    """Head ending in assistant and tail starting with user: the tail grows to start on assistant."""
    msgs = _roles("sua" + "ua" * 5 + "u")
    b = select_boundaries(msgs, [1] * len(msgs), _policy())
    assert msgs[b.tail_start]["role"] == "assistant" and b.summary_role == "user"
    assert msgs[-1] in msgs[b.tail_start :]


def test_previous_marker_is_left_in_the_middle() -> None:
    """The tail never reaches back over the previous summary marker."""
    msgs = _roles("suauama" + "ua" * 2)  # 5 = marker (user role), 6 = assistant
    b = select_boundaries(msgs, [1] * len(msgs), _policy(protect_last_n=7))
    assert b.marker_index == 5 and b.tail_start == 6


@pytest.mark.parametrize("spec", ["sua", "suau", "suamu"])
def test_nothing_to_compact_is_refused(spec: str) -> None:
    """When head and guarantees cover everything new, the plan is refused with a reason."""
    msgs = _roles(spec)
    with pytest.raises(CompactionRefused, match="nothing to compact|previous summary"):
        select_boundaries(msgs, [1] * len(msgs), _policy())


def test_shrink_keeps_only_guarantees() -> None:
    """With shrink, the tail starts at the guarantee even if protect_last_n asks for more."""
    msgs = _roles("suc" + "ua" * 10)
    b = select_boundaries(msgs, [1] * len(msgs), _policy(protect_last_n=15), shrink=True)
    assert b.tail_start == b.guarantee_start
