"""Deferred tool loading, the pure part: when to defer, what the index says, what is loaded."""

from __future__ import annotations

from typing import Any

import pytest

from agent.messages import ChatMessage, tool_message
from agent.providers.base import ToolSpec
from agent.tools.deferred import (
    INDEX_BUDGET_CHARS,
    TOOL_SEARCH,
    find_tools,
    index_text,
    loaded_names,
    offered_specs,
    one_line,
    search_result,
)

SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
BUILTIN = ToolSpec(name="read_file", description="Read a file.", parameters=SCHEMA)


def _mcp(n: int, server: str = "srv", words: str = "Does a thing.") -> list[ToolSpec]:
    return [
        ToolSpec(name=f"{server}__t{i:03d}", description=f"Tool {i}. {words}", parameters=SCHEMA)
        for i in range(n)
    ]


def _deferrable(name: str) -> bool:
    return "__" in name


def _call(name: str) -> ChatMessage:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}}
        ],
    }


@pytest.mark.parametrize(
    ("count", "defer_after", "deferred"),
    [(3, 12, False), (12, 12, False), (13, 12, True), (1, 0, True)],
)
def test_tools_are_deferred_only_past_the_threshold(
    count: int, defer_after: int, deferred: bool
) -> None:
    specs = (BUILTIN, *_mcp(count))
    offered = offered_specs(specs, [], is_deferrable=_deferrable, defer_after=defer_after)
    names = [s.name for s in offered]
    if deferred:
        assert names == ["read_file", TOOL_SEARCH]
    else:
        assert names == [s.name for s in specs]


def test_never_deferred_without_a_threshold() -> None:
    specs = (BUILTIN, *_mcp(100))
    assert offered_specs(specs, [], is_deferrable=_deferrable, defer_after=None) == specs


def test_loaded_tools_join_in_registry_order_after_tool_search() -> None:
    """A search result's first line and a call already made both count as loaded."""
    specs = (BUILTIN, *_mcp(20))
    transcript: list[ChatMessage] = [
        _call(TOOL_SEARCH),
        tool_message("c", TOOL_SEARCH, search_result([specs[9], specs[3]])),
        _call("srv__t015"),
    ]
    offered = offered_specs(specs, transcript, is_deferrable=_deferrable, defer_after=5)
    assert [s.name for s in offered] == [
        "read_file",
        TOOL_SEARCH,
        "srv__t002",
        "srv__t008",
        "srv__t015",
    ]


def test_only_tool_search_results_load_tools() -> None:
    """A different tool's output that looks like a load line loads nothing."""
    fake = tool_message("c", "web_fetch", "loaded: srv__t001")
    assert loaded_names([fake]) == frozenset()


def test_the_index_shrinks_to_fit_and_always_names_every_tool() -> None:
    """Few tools: names and descriptions; many: names grouped by server; huge: servers only."""
    few = index_text(_mcp(5))
    assert "srv__t004: Tool 4." in few
    many = index_text(_mcp(300, words="A long description " * 10))
    assert len(many) <= INDEX_BUDGET_CHARS and "t299" in many and "Tool 1" not in many
    huge = index_text(_mcp(3000))
    assert huge == "srv: 3000 tools (search by words)"


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [
        ("Read a file. Then more.", 70, "Read a file."),
        ("  spaced\n\nout  words ", 70, "spaced out words"),
        ("x" * 100, 10, "x" * 9 + "…"),
        ("", 10, ""),
    ],
)
def test_one_line(text: str, width: int, expected: str) -> None:
    assert one_line(text, width) == expected


def test_find_tools_by_exact_names_then_by_words() -> None:
    specs = [
        ToolSpec(
            name="cal__create_event", description="Create a calendar event.", parameters=SCHEMA
        ),
        ToolSpec(
            name="cal__list_events",
            description="List calendar events in a range.",
            parameters=SCHEMA,
        ),
        ToolSpec(name="mail__send", description="Send an email message.", parameters=SCHEMA),
    ]
    assert [s.name for s in find_tools("mail__send, CAL__LIST_EVENTS", specs)] == [
        "mail__send",
        "cal__list_events",
    ]
    assert [s.name for s in find_tools("send email", specs)] == ["mail__send"]
    assert [s.name for s in find_tools("calendar events", specs)][0].startswith("cal__")
    assert find_tools("weather", specs) == []
    assert search_result([]).startswith("No tool matches")
