"""Summary marker format and the one-time system note."""

from __future__ import annotations

import pytest

from agent.compaction.markers import (
    COMPACTION_NOTE,
    SUMMARY_END,
    SUMMARY_START,
    find_newest_marker,
    has_compaction_note,
    make_summary_marker,
    parse_summary_marker,
    with_compaction_note,
)
from agent.messages import assistant_message, strip_meta, system_message, user_message


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_marker_round_trips(role: str) -> None:
    """A marker carries its role, `_kind` summary, delimiters, and parses back to its text."""
    msg = make_summary_marker("## Goal\nship it\n", role)  # type: ignore[arg-type]
    assert msg["role"] == role and msg["_kind"] == "summary"
    assert SUMMARY_START in msg["content"] and msg["content"].endswith(SUMMARY_END)
    assert "not a new instruction" in msg["content"]
    assert parse_summary_marker(msg) == "## Goal\nship it"


def test_marker_is_recognised_without_metadata() -> None:
    """A marker whose `_kind` was lost (wire form) is still found by its text."""
    wire = strip_meta(make_summary_marker("facts", "user"))
    assert parse_summary_marker(wire) == "facts"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "msg",
    [
        user_message("hello"),
        assistant_message(None),
        user_message(f"{SUMMARY_START} quoted by the user {SUMMARY_END}"),
    ],
)
def test_non_markers_parse_to_none(msg: dict) -> None:
    """Ordinary messages, even ones quoting the delimiters, are not markers."""
    assert parse_summary_marker(msg) is None  # type: ignore[arg-type]


def test_find_newest_marker_picks_the_last() -> None:
    """With two markers, the newest one's index and text come back."""
    msgs = [
        user_message("a"),
        make_summary_marker("old", "assistant"),
        user_message("b"),
        make_summary_marker("new", "assistant"),
    ]
    assert find_newest_marker(msgs) == (3, "new")
    assert find_newest_marker(msgs[:1]) is None


def test_note_is_added_once_and_then_byte_stable() -> None:
    """The first note changes the system message (dropping its row id); later calls change nothing."""
    sys_msg = system_message("You are Hermes.")
    sys_msg["_id"] = 1
    once = with_compaction_note(sys_msg)
    assert once["content"].endswith(COMPACTION_NOTE) and "_id" not in once
    assert with_compaction_note(once) is once
    assert has_compaction_note(once) and not has_compaction_note(sys_msg)


def test_note_on_block_content_and_non_system() -> None:
    """Block content gets a text block; a non-system head message is left alone."""
    blocks = {"role": "system", "content": [{"type": "text", "text": "sys"}]}
    noted = with_compaction_note(blocks)  # type: ignore[arg-type]
    assert has_compaction_note(noted) and len(noted["content"]) == 2
    user = user_message("hi")
    assert with_compaction_note(user) is user
