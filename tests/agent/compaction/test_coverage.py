"""Salient terms of absorbed messages, and how much of them a summary still names."""

from __future__ import annotations

import pytest

from agent.compaction.coverage import coverage, salient_terms
from agent.messages import assistant_message, tool_message


def test_terms_are_the_concrete_things_the_work_was_about() -> None:
    """Paths, identifiers, ticket tags and error names count; plain prose does not."""
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "gateway/run.py"}'},
    }
    messages = [
        assistant_message("Fixing `retry_after` in ticket HERM-42 for the parser", [call]),
        tool_message("c1", "read_file", "TimeoutError raised in src/app/main.py " + "x" * 2000),
        assistant_message("It was a ConnectionResetError in StoreConnection, fixed."),
    ]
    terms = set(salient_terms(messages))
    assert {"retry_after", "HERM-42", "gateway/run.py", "TimeoutError", "src/app/main.py"} <= terms
    assert {"ConnectionResetError", "StoreConnection"} <= terms
    assert "parser" not in terms and "fixed" not in terms


def test_only_the_start_of_a_tool_result_counts() -> None:
    """File text deep inside a tool result is not what the summary must keep."""
    messages = [tool_message("c1", "read_file", "x" * 400 + " deep_inside_name")]
    assert salient_terms(messages) == []


@pytest.mark.parametrize(
    ("summary", "expected"),
    [("touched gateway/run.py and retry_after", 1.0), ("touched gateway/run.py", 0.5), ("", 0.0)],
)
def test_coverage_is_the_share_of_terms_named(summary: str, expected: float) -> None:
    """Coverage counts exact mentions; no terms at all means nothing was lost."""
    assert coverage(["gateway/run.py", "retry_after"], summary) == expected
    assert coverage([], summary) == 1.0
