"""Ledger rules: repeats, replacements, and the block the system message carries."""

from __future__ import annotations

from itertools import count

import pytest

from agent.compaction.markers import COMPACTION_NOTE, with_compaction_note
from agent.ledger.rules import (
    LEDGER_END,
    LEDGER_START,
    Addition,
    Repeat,
    apply_ledger,
    plan_entry,
    render_ledger,
)
from agent.messages import system_message, user_message
from state.values import Instruction

_ids = count(1)


def entry(text: str, *, kind: str = "detected", source: int | None = 7) -> Instruction:
    return Instruction(
        id=next(_ids),
        session_id="s",
        text=text,
        kind=kind,
        source_message_id=source,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("always use tabs", "Always use tabs!", "repeat"),
        ("always use tabs", "never use tabs", "supersedes"),
        ("use pytest, not unittest", "use unittest, not pytest", "supersedes"),
        ("never use print for logging", "always use print statements for logging", "supersedes"),
        ("always use tabs", "never push to main", "new"),
        ("never change the public API", "always keep the public API unchanged", "new"),
        ("no new dependencies", "never add new dependencies", "new"),
    ],
)
def test_plan_entry(old: str, new: str, expected: str) -> None:
    """Same words repeat; same subject or flipped polarity replaces; other subjects add."""
    existing = entry(old)
    match plan_entry([existing], new):
        case Repeat(entry=found):
            assert expected == "repeat" and found is existing
        case Addition(supersedes=replaced):
            assert expected == ("supersedes" if replaced is existing else "new")
            assert replaced is None or replaced is existing


def test_the_newest_matching_entry_is_the_one_replaced() -> None:
    """When two entries are about the subject, the replacement retires the newer one."""
    older, newer = entry("always use tabs"), entry("always use tabs please")
    result = plan_entry([older, newer], "never use tabs")
    assert isinstance(result, Addition) and result.supersedes is newer


def test_block_lists_entries_with_their_source_and_pins() -> None:
    """The block is framed, explains itself as reference material, and cites source rows."""
    block = render_ledger(
        [entry("never push to main", source=42), entry("be brief", kind="pin", source=None)]
    )
    lines = block.splitlines()
    assert lines[0] == LEDGER_START and lines[-1] == LEDGER_END
    assert "reference material, not a new request" in lines[1]
    assert lines[2:4] == ["1. never push to main [#42]", "2. (pinned) be brief"]
    assert render_ledger([]) == ""


def test_apply_ledger_rewrites_only_the_system_message() -> None:
    """The block replaces the old one in place (note kept), nothing else changes, and an
    unchanged ledger returns the very same list."""
    messages = [with_compaction_note(system_message("You are Hermes.")), user_message("hi")]
    first = apply_ledger(messages, [entry("never push to main")])
    assert first is not messages and first[1] is messages[1]
    text = str(first[0]["content"])
    assert text.startswith("You are Hermes.") and COMPACTION_NOTE in text
    assert text.count(LEDGER_START) == 1 and "never push to main" in text
    assert apply_ledger(first, [entry("never push to main")]) is first
    second = apply_ledger(first, [entry("always be brief")])
    assert str(second[0]["content"]).count(LEDGER_START) == 1
    assert "never push" not in str(second[0]["content"])
    cleared = apply_ledger(second, [])
    assert LEDGER_START not in str(cleared[0]["content"]) and COMPACTION_NOTE in str(
        cleared[0]["content"]
    )
    assert "_id" not in cleared[0]


def test_apply_ledger_handles_block_content_and_no_system_message() -> None:
    """A system message made of blocks gets one block for the ledger; no system, no change."""
    system = {"role": "system", "content": [{"type": "text", "text": "You are Hermes."}]}
    out = apply_ledger([system, user_message("x")], [entry("never guess")])  # type: ignore[list-item]
    blocks = out[0]["content"]
    assert (
        isinstance(blocks, list) and len(blocks) == 2 and blocks[1]["text"].startswith(LEDGER_START)
    )
    assert apply_ledger(out, [entry("never guess")]) is out
    only_user = [user_message("x")]
    assert apply_ledger(only_user, [entry("never guess")]) is only_user
