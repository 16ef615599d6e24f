"""Phase 1 pruning of long tool results."""

from __future__ import annotations

import pytest

from agent.compaction.prune import PRUNED_TOOL_OUTPUT, prune_tool_results
from agent.messages import assistant_message, tool_message, user_message

LONG = "x" * 201
SHORT = "y" * 200


@pytest.mark.parametrize(
    ("start", "end", "keep", "expected_cleared"),
    [
        (0, 5, (), 2),
        (0, 3, (), 1),
        (3, 5, (), 1),
        (0, 5, (2,), 1),
        (0, 0, (), 0),
    ],
)
def test_prune_range(start: int, end: int, keep: tuple[int, ...], expected_cleared: int) -> None:
    """Only tool results over 200 chars inside the range and not kept are cleared."""
    msgs = [
        user_message(LONG),
        tool_message("a", "t", SHORT),
        tool_message("b", "t", LONG),
        assistant_message(LONG),
        tool_message("c", "t", LONG),
    ]
    out, cleared = prune_tool_results(msgs, start, end, keep=keep)
    assert cleared == expected_cleared
    assert sum(m["content"] == PRUNED_TOOL_OUTPUT for m in out) == expected_cleared
    assert out[0] is msgs[0] and out[1] is msgs[1] and out[3] is msgs[3]


def test_pruned_message_loses_row_identity_and_input_is_untouched() -> None:
    """A cleared result is a new dict without `_id`/`_persisted`; the input list is unchanged."""
    msg = tool_message("a", "t", LONG)
    msg["_id"], msg["_persisted"] = 7, True
    out, _ = prune_tool_results([msg], 0, 1)
    assert out[0]["content"] == PRUNED_TOOL_OUTPUT
    assert "_id" not in out[0] and "_persisted" not in out[0] and out[0]["tool_call_id"] == "a"
    assert msg["content"] == LONG
