"""Chat command parsing, the same on every platform."""

from __future__ import annotations

import pytest

from gateway.commands import (
    COMMANDS,
    Command,
    UnknownCommand,
    close_matches,
    help_text,
    parse_command,
)


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
        (
            "/resume 20260101_120000_1a2b3c4d",
            Command(name="resume", argument="20260101_120000_1a2b3c4d"),
        ),
        ("/title  Trip to Oslo ", Command(name="title", argument="Trip to Oslo")),
        ("/pin\nbe brief", Command(name="pin", argument="be brief")),
        ("/unknown thing", UnknownCommand(name="unknown")),
        ("/Foo@HermesBot", UnknownCommand(name="foo")),
        ("/etc/hosts looks odd", None),
        ("/ 2 is not a command", None),
        ("/usr/bin/env python", None),
        ("hello /new", None),
        ("", None),
        ("/", None),
    ],
)
def test_parse_command(text: str, expected: Command | UnknownCommand | None) -> None:
    """Known commands parse with their argument; a command-like word that is no command is
    unknown (answered locally); paths and other text are normal messages."""
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("typed", "expected"),
    [("sesions", ["sessions"]), ("stauts", ["status"]), ("pn", ["pin", "pins"]), ("zzz", [])],
)
def test_close_matches_suggest_the_command_meant(typed: str, expected: list[str]) -> None:
    """A typo gets the commands it was probably meant to be, best first; nonsense gets none."""
    assert close_matches(typed)[: len(expected) or None] == expected


def test_help_lists_every_command_and_the_terminal_keys() -> None:
    """/help names every command of the table; the terminal's also lists /exit and its keys."""
    plain, terminal = help_text(), help_text(terminal=True)
    assert all(f"/{c.name}" in plain for c in COMMANDS)
    assert "/exit" not in plain and "Alt-Enter" not in plain
    assert "/exit" in terminal and "Alt-Enter" in terminal and "Ctrl-C" in terminal
