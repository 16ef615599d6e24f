"""The summary request: template, iterative update, focus, redaction rule, clipping."""

from __future__ import annotations

import pytest

from agent.compaction.summary_prompt import (
    SUMMARY_TEMPLATE,
    build_summary_request,
    serialize_for_summary,
)
from agent.messages import assistant_message, user_message
from tests.agent.compaction.transcripts import exchange

HEADINGS = [
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Relevant Files",
    "## Next Steps",
    "## Critical Context",
]


def _prompt(**kw: object) -> str:
    middle = [user_message("build it"), *exchange("terminal", "ok", command="make")]
    req = build_summary_request(middle, model="aux", budget_tokens=3_000, **kw)  # type: ignore[arg-type]
    assert req.model == "aux" and req.max_tokens == 3_000
    assert [m["role"] for m in req.messages] == ["system", "user"]
    return str(req.messages[1]["content"])


def test_template_headings_in_order() -> None:
    """The seed's structure appears with every heading, in order."""
    text = _prompt()
    positions = [text.index(h) for h in HEADINGS]
    assert positions == sorted(positions)
    assert SUMMARY_TEMPLATE in text


@pytest.mark.parametrize(
    ("kw", "present", "absent"),
    [
        ({}, "Summarize the conversation", "UPDATE"),
        ({"previous_summary": "## Goal\nold goal"}, "UPDATE the existing summary", "Summarize the"),
        ({"focus": "the database schema"}, "<focus>\nthe database schema\n</focus>", "UPDATE"),
    ],
)
def test_fresh_update_and_focus(kw: dict[str, object], present: str, absent: str) -> None:
    """A previous summary turns the request into an update; focus text is passed along."""
    text = _prompt(**kw)
    assert present in text and absent not in text
    if "previous_summary" in kw:
        assert "<previous-summary>\n## Goal\nold goal\n</previous-summary>" in text


def test_credentials_rule_and_budget() -> None:
    """The summarizer is told to redact credentials and to stay within the budget."""
    text = _prompt()
    assert "[REDACTED]" in text and "3000 tokens" in text


def test_serialization_shows_calls_and_clips_long_text() -> None:
    """Tool calls show name and arguments; long text keeps its start and end."""
    long_text = "A" * 5_000 + "MIDDLE" + "Z" * 5_000
    out = serialize_for_summary(
        [assistant_message(long_text), *exchange("read_file", "body", path="x.py")], 1_000
    )
    assert out.startswith("[assistant]\nAAA") and "MIDDLE" not in out and "ZZZ" in out
    assert 'called read_file({"path": "x.py"})' in out and "[tool: read_file]\nbody" in out
