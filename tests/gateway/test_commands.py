"""Chat command parsing, the same on every platform."""

from __future__ import annotations

import pytest

from gateway.commands import Command, parse_command


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/help", Command(name="help")),
        ("/new", Command(name="new")),
        ("/new@HermesBot", Command(name="new")),
        (
            "  /compress   the database schema ",
            Command(name="compress", argument="the database schema"),
        ),
        ("/status", Command(name="status")),
        ("/MODEL claude-haiku-4-5", Command(name="model", argument="claude-haiku-4-5")),
        ("/sessions", Command(name="sessions")),
        ("/unknown thing", None),
        ("hello /new", None),
        ("", None),
        ("/", None),
    ],
)
def test_parse_command(text: str, expected: Command | None) -> None:
    """Known commands parse with their argument; everything else is a normal message."""
    assert parse_command(text) == expected
