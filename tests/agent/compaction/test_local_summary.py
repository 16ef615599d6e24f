"""The deterministic local summary used when the summary model fails."""

from __future__ import annotations

import pytest

from agent.compaction.local_summary import build_local_summary, extract_facts
from agent.messages import assistant_message, user_message
from agent.redaction import redact_text
from tests.agent.compaction.transcripts import exchange, persisted


def _middle() -> list:
    return [
        user_message("Please add retries to src/client.py, use the existing helper"),
        *exchange(
            "terminal",
            "Traceback (most recent call last):\nValueError: bad port",
            command="pytest -x",
        ),
        *exchange("write_file", "written", path="src/client.py"),
        assistant_message("I decided to use exponential backoff instead of a fixed delay."),
        assistant_message("Next: still need to update docs/retries.md."),
    ]


def test_facts_cover_requests_files_commands_errors_decisions_open_items() -> None:
    """Every kind of fact the policy lists is extracted from the middle."""
    facts = extract_facts(_middle())
    assert facts.requests == ["Please add retries to src/client.py, use the existing helper"]
    assert "pytest -x" in facts.commands
    assert "src/client.py" in facts.files and "docs/retries.md" in facts.files
    assert any("ValueError" in e or "Traceback" in e for e in facts.errors)
    assert any("exponential backoff" in d for d in facts.decisions)
    assert any("docs/retries.md" in o for o in facts.open_items)


def test_summary_has_the_template_and_carries_the_previous_summary() -> None:
    """The text uses the template's headings, names the failure, and keeps the old summary."""
    text = build_local_summary(
        _middle(), previous_summary="## Goal\nearlier goal", failure="BadRequest", max_chars=10_000
    )
    for heading in (
        "## Goal",
        "## Progress",
        "## Relevant Files",
        "## Next Steps",
        "## Critical Context",
    ):
        assert heading in text
    assert "BadRequest" in text and "earlier goal" in text and "pytest -x" in text


def test_summary_respects_the_size_limit() -> None:
    """A huge middle still yields a summary within max_chars."""
    middle = [user_message(f"request {i} " + "x" * 300) for i in range(200)]
    assert (
        len(build_local_summary(middle, previous_summary=None, failure="E", max_chars=1_500))
        <= 1_500
    )


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("key sk-abcdef1234567890XYZ here", "sk-abcdef1234567890XYZ"),
        ("Authorization: Bearer abc.def.ghi123456", "abc.def.ghi123456"),
        ('api_key="hunter2hunter2"', "hunter2hunter2"),
        ("password: correct-horse", "correct-horse"),
        ("token ghp_abcdefghijklmnopqrstuvwx", "ghp_abcdefghijklmnopqrstuvwx"),
    ],
)
def test_redact_text(text: str, leak: str) -> None:
    """Strings shaped like credentials become [REDACTED]."""
    out = redact_text(text)
    assert leak not in out and "[REDACTED]" in out


def test_redaction_leaves_ordinary_text() -> None:
    """Plain prose about tokens and keys is not mangled."""
    text = "max_tokens: 4096 and the tokens were counted; the key idea is simple"
    assert redact_text(text) == text


def test_stored_facts_cite_their_rows() -> None:
    """Requests, commands, errors and decisions of stored messages carry their row anchors."""
    middle = persisted(_middle())
    text = build_local_summary(middle, previous_summary=None, failure="E", max_chars=10_000)
    assert "- [#1] Please add retries to src/client.py" in text
    assert "- [#2] pytest -x" in text
    assert "[#3] Traceback" in text or "[#3] ValueError" in text
    assert "- [#6] I decided to use exponential backoff" in text
