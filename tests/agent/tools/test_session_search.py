"""The session_search tool: short cited results from the real store, archived hits marked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from agent.messages import assistant_message, user_message
from agent.tools.registry import ToolContext, ToolRegistry
from agent.tools.session_search import MAX_RESULT_CHARS, format_hits, session_search_tool
from state import SqlSessionStore, default_url


@dataclass(frozen=True, slots=True)
class _Hit:
    session_id: str
    message_id: int
    role: str
    snippet: str
    created_at: float
    active: bool


def _hit(i: int, *, active: bool = True, snippet: str = "the [fox] ran") -> _Hit:
    return _Hit(f"s{i}", 100 + i, "user", snippet, 86_400.0 * i, active)


@pytest.mark.parametrize(
    ("hits", "expected_lines", "contains"),
    [
        ([], 1, ["No earlier messages match 'fox'."]),
        ([_hit(1)], 2, ["session s1 msg 101 (user, 1970-01-02, active): the [fox] ran"]),
        ([_hit(2, active=False)], 2, ["msg 102", "archived"]),
        ([_hit(i, snippet="x" * 1000) for i in range(10)], None, ["more not shown", "…"]),
    ],
    ids=["none", "one", "archived", "over-budget"],
)
def test_format_hits(hits: list[_Hit], expected_lines: int | None, contains: list[str]) -> None:
    """Results cite session and message ids, mark archived hits and stay within the budget."""
    text = format_hits("fox", hits)
    assert len(text) <= MAX_RESULT_CHARS
    if expected_lines is not None:
        assert len(text.splitlines()) == expected_lines
    for part in contains:
        assert part in text


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlSessionStore]:
    s = await SqlSessionStore.open(default_url(tmp_path))
    yield s
    await s.aclose()


def _call(arguments: dict) -> dict:
    return {
        "id": "t1",
        "type": "function",
        "function": {"name": "session_search", "arguments": json.dumps(arguments)},
    }


async def _seed(store: SqlSessionStore) -> tuple[str, str, list]:
    here = await store.sessions.create_session()
    there = await store.sessions.create_session(platform="telegram")
    old = [user_message("deploy the zephyr service"), assistant_message("zephyr deployed")]
    await store.transcript.append(here.id, old)
    await store.transcript.archive_and_compact(
        here.id, [{"role": "user", "content": "s", "_kind": "summary"}]
    )
    await store.transcript.append(there.id, [user_message("zephyr in another chat")])
    return here.id, there.id, old


async def test_tool_finds_archived_rows_across_sessions(store: SqlSessionStore) -> None:
    """Through the registry, a search cites every session and marks the archived rows."""
    here, there, old = await _seed(store)
    registry = ToolRegistry([session_search_tool()])
    ctx = ToolContext(session_id=here, services={"store": store})
    result = await registry.run(_call({"query": "zephyr"}), ctx)
    assert f"session {there}" in result and f"msg {old[0]['_id']}" in result
    assert result.count("archived") == 2 and len(result) <= MAX_RESULT_CHARS


async def test_tool_session_only_and_limit(store: SqlSessionStore) -> None:
    """session_only keeps the current session's hits; limit caps them."""
    here, there, _ = await _seed(store)
    registry = ToolRegistry([session_search_tool()])
    ctx = ToolContext(session_id=here, services={"store": store})
    scoped = await registry.run(_call({"query": "zephyr", "session_only": True}), ctx)
    assert there not in scoped and here in scoped
    one = await registry.run(_call({"query": "zephyr", "limit": 1}), ctx)
    assert one.startswith("1 match")


@pytest.mark.parametrize(
    ("arguments", "services", "message"),
    [
        ({"query": ""}, True, "non-empty 'query'"),
        ({}, True, "non-empty 'query'"),
        ({"query": "x"}, False, "no session store"),
    ],
)
async def test_tool_errors_go_back_to_the_model(
    store: SqlSessionStore, arguments: dict, services: bool, message: str
) -> None:
    """Bad arguments or a missing store become an error result, not an exception."""
    ctx = ToolContext(session_id="s", services={"store": store} if services else {})
    result = await ToolRegistry([session_search_tool()]).run(_call(arguments), ctx)
    assert result.startswith("Error:") and message in result
