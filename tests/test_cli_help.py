"""Every `hermes` option explains itself: a help text, and its default where it has one."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import run_agent


def _parsers(
    parser: argparse.ArgumentParser, path: str = "hermes"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_option_has_help_and_says_its_default() -> None:
    """Each option and argument of every sub-command has help; one with a default value (not
    None, False or a list) says "default" in its help."""
    missing: list[str] = []
    for path, parser in _parsers(run_agent.build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            name = f"{path} {'/'.join(action.option_strings) or action.dest}"
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not action.help:
                missing.append(f"{name}: no help")
                continue
            default = action.default
            if default not in (None, False, [], argparse.SUPPRESS) and "default" not in action.help:
                missing.append(f"{name}: default {default!r} not in its help")
    assert missing == []


def test_every_sub_command_has_a_description() -> None:
    """`hermes X --help` says what X does."""
    bare = [
        path
        for path, parser in _parsers(run_agent.build_parser())
        if path != "hermes" and not (parser.description or parser.format_usage())
    ]
    assert bare == []
