"""Tool-pair sanitizing after a splice."""

from __future__ import annotations

from agent.compaction.sanitize import STUB_TOOL_RESULT, find_orphans, sanitize_tool_pairs
from agent.messages import assistant_message, tool_message, user_message
from tests.agent.compaction.transcripts import call


def test_valid_transcript_is_unchanged() -> None:
    """Whole pairs pass through as the same objects."""
    c1, c2 = call("a"), call("b")
    msgs = [
        user_message("u"),
        assistant_message(None, [c1, c2]),
        tool_message(c1["id"], "a", "1"),
        tool_message(c2["id"], "b", "2"),
        assistant_message("done"),
    ]
    out = sanitize_tool_pairs(msgs)
    assert len(out) == len(msgs) and all(a is b for a, b in zip(out, msgs, strict=True))
    assert find_orphans(out) == ([], [])


def test_result_without_call_is_removed() -> None:
    """A result whose call was summarized away is dropped."""
    msgs = [user_message("u"), tool_message("gone", "a", "1"), assistant_message("x")]
    out = sanitize_tool_pairs(msgs)
    assert [m["role"] for m in out] == ["user", "assistant"]
    assert find_orphans(msgs) == ([], ["gone"])


def test_call_without_result_gets_a_stub_in_call_order() -> None:
    """Unanswered calls get stub results right after the existing ones."""
    c1, c2, c3 = call("a"), call("b"), call("c")
    msgs = [
        assistant_message(None, [c1, c2, c3]),
        tool_message(c2["id"], "b", "2"),
        user_message("u"),
    ]
    out = sanitize_tool_pairs(msgs)
    assert [m.get("tool_call_id") for m in out[1:4]] == [c2["id"], c1["id"], c3["id"]]
    assert out[2]["content"] == STUB_TOOL_RESULT and out[2]["name"] == "a"
    assert out[4]["role"] == "user"
    assert find_orphans(out) == ([], [])


def test_duplicate_and_misplaced_results_are_removed() -> None:
    """A second result for one call, or a result after an intervening message, is dropped."""
    c1 = call("a")
    msgs = [
        assistant_message(None, [c1]),
        tool_message(c1["id"], "a", "1"),
        tool_message(c1["id"], "a", "again"),
        user_message("u"),
        tool_message(c1["id"], "a", "late"),
    ]
    out = sanitize_tool_pairs(msgs)
    assert [m["role"] for m in out] == ["assistant", "tool", "user"]
    assert out[1]["content"] == "1"
