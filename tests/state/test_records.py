"""Pure conversions of the store: message rows, the compaction plan, token estimates."""

from __future__ import annotations

from typing import Any

import pytest

from agent.messages import ChatMessage
from state.records import (
    estimate_tokens,
    message_from_row,
    plan_compaction,
    row_from_message,
    row_key,
)


def _key(msg: dict[str, Any]) -> tuple[Any, ...]:
    return row_key(row_from_message(msg, session_id="s", position=0))  # type: ignore[arg-type]


SYS = {"role": "system", "content": "be brief", "_id": 1}
USER = {"role": "user", "content": "hi", "_id": 2}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    "_id": 3,
}
RESULT = {"role": "tool", "content": "a.txt", "tool_call_id": "c1", "name": "ls", "_id": 4}
ACTIVE = {m["_id"]: _key(m) for m in (SYS, USER, CALL, RESULT)}


@pytest.mark.parametrize(
    ("new_active", "carried", "inserted"),
    [
        ([SYS, USER, CALL, RESULT], ((0, 1), (1, 2), (2, 3), (3, 4)), ()),
        ([{**SYS, "content": "be brief [compacted]"}, CALL, RESULT], ((1, 3), (2, 4)), (0,)),
        ([{"role": "user", "content": "summary", "_kind": "summary"}, RESULT], ((1, 4),), (0,)),
        ([{**USER, "_id": 99}], (), (0,)),
        ([USER, USER], ((0, 2),), (1,)),
        ([{**CALL, "tool_calls": []}], (), (0,)),
        ([{**RESULT, "name": "cat"}], (), (0,)),
        ([{**USER, "_id": "2"}], (), (0,)),
        ([], (), ()),
    ],
    ids=[
        "all-carried",
        "system-changed",
        "summary-plus-tail",
        "unknown-id",
        "duplicate-id",
        "tool-calls-changed",
        "name-changed",
        "id-not-int",
        "empty",
    ],
)
def test_plan_compaction_carries_only_unchanged_active_rows(
    new_active: list[ChatMessage], carried: tuple[Any, ...], inserted: tuple[int, ...]
) -> None:
    """A message is carried only when its `_id` is active and its content is unchanged."""
    plan = plan_compaction(new_active, ACTIVE)
    assert plan.carried == carried
    assert plan.inserted == inserted


@pytest.mark.parametrize(
    "msg",
    [
        {"role": "user", "content": "héllo 🦊", "_created_at": 5.0},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": CALL["tool_calls"],
            "_created_at": 1.0,
        },
        {"role": "tool", "content": "out", "tool_call_id": "c1", "name": "ls", "_created_at": 2.0},
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "_created_at": 3.0,
        },
        {"role": "assistant", "content": "x", "reasoning": {"k": 1}, "_created_at": 4.0},
        {"role": "user", "content": "sum", "_kind": "summary", "_created_at": 6.0},
    ],
    ids=["text", "tool-call", "tool-result", "blocks", "extra-key", "summary"],
)
def test_message_round_trips_through_a_row(msg: dict[str, Any]) -> None:
    """A stored message loads back equal, plus `_id` and `_persisted` stamps."""
    row = row_from_message(msg, session_id="s", position=0)  # type: ignore[arg-type]
    loaded = message_from_row({**row, "id": 7})
    expected = {**msg, "_id": 7, "_persisted": True, "_kind": msg.get("_kind", "normal")}
    assert loaded == expected


def test_row_drops_cache_control_and_indexes_block_text() -> None:
    """A cache breakpoint is not stored; block text is what search indexes."""
    msg = {"role": "user", "content": [{"type": "text", "text": "ab"}], "cache_control": {"t": "e"}}
    row = row_from_message(msg, session_id="s", position=3, now=9.0)  # type: ignore[arg-type]
    assert row["extra"] is None
    assert row["content"] == "ab"
    assert row["created_at"] == 9.0
    assert row["position"] == 3


@pytest.mark.parametrize(
    ("msg", "tokens"),
    [
        ({"role": "user", "content": ""}, 4),
        ({"role": "user", "content": "x" * 400}, 104),
        ({"role": "assistant", "content": None, "tool_calls": CALL["tool_calls"]}, 5),
    ],
)
def test_estimate_tokens_is_chars_over_four_plus_overhead(msg: dict[str, Any], tokens: int) -> None:
    """The stored estimate counts text and tool-call arguments at four characters a token."""
    assert estimate_tokens(msg) == tokens  # type: ignore[arg-type]
