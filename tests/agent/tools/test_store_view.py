"""Tools read through a view bound to the turn's owner, even on a session id they should never
have been given (defence in depth behind the front doors: issue 24)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from agent.access import Principal
from agent.archive.recall import recall_tool
from agent.tools.args import scoped_services, store_of
from agent.tools.registry import ToolContext, ToolRegistry
from agent.tools.session_search import session_search_tool
from plugins.context_engine.lcm.tools import lcm_tools
from state import SqlSessionStore, default_url
from state.values import ReadScope

SECRET = "4417"


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlSessionStore]:
    s = await SqlSessionStore.open(default_url(tmp_path))
    yield s
    await s.aclose()


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


async def test_tools_on_another_owners_session_read_nothing(store: SqlSessionStore) -> None:
    """Bob's turn pointed at Alice's session (as if a front door had let it through): recall by
    anchor and by query, lcm_grep and a session-only search all come back empty; the same
    calls bound to Alice read her row (so the emptiness is the scope, not the call)."""
    alice = await store.sessions.create_session(platform="telegram", owner="telegram:111")
    await store.transcript.append(
        alice.id, [{"role": "user", "content": f"my PIN is zorvex {SECRET}"}]
    )
    [row] = await store.transcript.show(alice.id)
    registry = ToolRegistry([session_search_tool(), recall_tool(), *lcm_tools()])
    calls = [
        _call("recall", anchor=f"#{row['_id']}"),
        _call("recall", query="zorvex"),
        _call("lcm_grep", pattern="zorvex"),
        _call("session_search", query="zorvex", session_only=True),
    ]
    for who, sees in (("112", False), ("111", True)):
        principal = Principal(platform="telegram", id=who, tools=frozenset(registry.names()))
        scope = ReadScope(owner=principal.owner)
        ctx = ToolContext(
            session_id=alice.id,
            principal=principal,
            scope=scope,
            services=scoped_services({"store": store}, scope),
        )
        assert store_of(ctx, "t").scope == scope  # a view, bound to the turn
        for made in calls:
            result = await registry.run(made, ctx)  # type: ignore[arg-type]
            assert (SECRET in result) is sees, (who, made, result)


async def test_a_raw_store_handed_to_a_tool_is_still_scoped(store: SqlSessionStore) -> None:
    """A context built without the turn's view (scripts, tests) still reads through one: the
    principal's own, else the machine owner's."""
    theirs = await store.sessions.create_session(platform="http", owner="http:alice")
    await store.transcript.append(theirs.id, [{"role": "user", "content": f"zorvex {SECRET}"}])
    principal = Principal(platform="http", id="bob", tools=frozenset({"session_search"}))
    ctx = ToolContext(session_id="", principal=principal, services={"store": store})
    assert store_of(ctx, "t").scope == ReadScope(owner="http:bob")
    result = await ToolRegistry([session_search_tool()]).run(
        _call("session_search", query="zorvex"),  # type: ignore[arg-type]
        ctx,
    )
    assert SECRET not in result
