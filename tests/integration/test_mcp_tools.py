"""MCP tools through the whole runtime: grants per principal, deferred loading with many tools,
approval, redaction, and a default request that does not grow.

What is judged is what the model was sent (FakeLLM records every request body) and what the
server did (a `touch` tool leaves a file). Request sizes are the compact JSON of the recorded
body (`json.dumps(separators=(",", ":"))`, UTF-8), the Anthropic Messages wire.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent.access import ApprovalRequest
from agent.config import TOOL_NAMES
from agent.tools.deferred import TOOL_SEARCH
from cli.runtime import Runtime
from sim.llm_server import FakeLLM, RecordedRequest, ToolCallSpec, Turn
from tests.agent.mcp.servers import kill, python_server, wait_until
from tests.gateway.harness import MODEL, make_config
from tests.integration.http_api import Served, serve

SECRET = "sk-ant-api03-" + "Q7w8E9r0" * 6
DEFAULT_BUDGET_BYTES = 8 * 1024
DEFERRABLE_BUILT_INS = {"memory", "read_document", "send_file"}
"""Built-ins that wait behind the index with the MCP tools when those are deferred."""


def _size(request: RecordedRequest) -> int:
    return len(json.dumps(request.json, separators=(",", ":"), ensure_ascii=False).encode())


def _tools(request: RecordedRequest) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in (request.json or {}).get("tools", [])}


def _call(name: str, **args: Any) -> ToolCallSpec:
    return ToolCallSpec(name=name, arguments=json.dumps(args))


def _tool_results(request: RecordedRequest) -> list[str]:
    """The text of every tool_result block sent (Anthropic wire)."""
    found: list[str] = []
    for message in (request.json or {}).get("messages", []):
        for block in message.get("content", []) if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                if isinstance(content, list):
                    found.append("".join(c.get("text", "") for c in content))
                else:
                    found.append(str(content))
    return found


async def _runtime(fake: FakeLLM, tmp_path: Path, **sections: Any) -> Runtime:
    config = make_config(fake, tmp_path / "state.db", **sections)
    return await Runtime.start(config, tmp_path, {})


async def _agent(runtime: Runtime) -> Any:
    info = await runtime.store.sessions.create_session(platform="cli", model=MODEL)
    return await runtime.open_agent(info.id)


async def test_the_default_request_is_unchanged_without_mcp(tmp_path: Path) -> None:
    """No MCP server configured: the five built-ins, no tool_search, no web tools."""
    async with FakeLLM() as fake:
        runtime = await _runtime(fake, tmp_path, tools={"enabled": list(TOOL_NAMES)})
        try:
            agent = await _agent(runtime)
            await agent.run_turn("hi")
        finally:
            await runtime.aclose()
        [request] = fake.requests
        assert set(_tools(request)) == set(TOOL_NAMES)
        assert runtime.mcp is None


async def test_sixty_mcp_tools_keep_the_default_request_small_and_all_reachable(
    tmp_path: Path,
) -> None:
    """60 widget tools (69 with the server's own 9): the first request carries the built-ins and
    one tool_search whose index names every tool, under 8 KB; loading one by name puts its
    schema (only its) in the next request, the call reaches the server, and a word search
    loads matching tools too."""
    async with FakeLLM() as fake:
        runtime = await _runtime(
            fake,
            tmp_path,
            tools={"enabled": list(TOOL_NAMES)},
            mcp={"servers": {"srv": python_server("--many", "60")}},
        )
        try:
            names = [n for n in runtime.deps.tools.names() if n.startswith("srv__")]
            assert len(names) == 69
            fake.script(
                Turn(tool_calls=[_call(TOOL_SEARCH, query="srv__widget_37")]),
                Turn(tool_calls=[_call("srv__widget_37", item="lamp", count=2)]),
                Turn(tool_calls=[_call(TOOL_SEARCH, query="weather entries")]),
                Turn(tool_calls=[_call("srv__widget_43", item="rain")]),
                Turn(text="done"),
            )
            agent = await _agent(runtime)
            await agent.run_turn("use widget 37, then a weather one")
        finally:
            await runtime.aclose()
        first, loaded, called, searched, last = fake.requests
        offered = _tools(first)
        built_ins = set(TOOL_NAMES) - DEFERRABLE_BUILT_INS
        assert set(offered) == {*built_ins, TOOL_SEARCH}
        assert _size(first) < DEFAULT_BUDGET_BYTES, _size(first)
        index = offered[TOOL_SEARCH]["description"]
        assert all(name in index for name in [*names, *DEFERRABLE_BUILT_INS])
        assert set(_tools(loaded)) == {*built_ins, TOOL_SEARCH, "srv__widget_37"}
        assert _tools(loaded)["srv__widget_37"]["input_schema"]["required"] == ["item"]
        assert "widget_37 did 2 x lamp" in _tool_results(called)[-1]
        weather = {f"srv__widget_{i:02d}" for i in (3, 13, 23, 33, 43)}
        assert set(_tools(last)) == {*built_ins, TOOL_SEARCH, "srv__widget_37", *weather}
        assert "widget_43 did 1 x rain" in _tool_results(last)[-1]
        assert _size(searched) < _size(last)


async def test_every_one_of_sixty_tools_can_be_found_by_name_and_by_its_words(
    tmp_path: Path,
) -> None:
    """tool_search answers each widget by exact name and by a phrase from its description
    (the registry's own search, against the live server's tools)."""
    async with FakeLLM() as fake:
        runtime = await _runtime(
            fake, tmp_path, mcp={"servers": {"srv": python_server("--many", "60")}}
        )
        try:
            tools = runtime.deps.tools
            ctx = runtime.deps.tool_context
            for i in range(60):
                name = f"srv__widget_{i:02d}"
                for query in (name, f"item {i:02d}"):
                    call = {
                        "id": "c",
                        "type": "function",
                        "function": {
                            "name": TOOL_SEARCH,
                            "arguments": json.dumps({"query": query}),
                        },
                    }
                    answer = await tools.run(call, ctx)
                    assert name in answer.splitlines()[0], (query, answer)
        finally:
            await runtime.aclose()


@pytest.fixture
async def keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Served:  # type: ignore[misc]
    keys = [
        {"name": "alice", "key": "sk-user-alice", "role": "user"},
        {"name": "bob", "key": "sk-user-bob", "role": "user", "tools": ["read_file", "mcp:srv"]},
        {"name": "carol", "key": "sk-user-carol", "role": "user", "tools": ["srv__echo"]},
    ]
    async with serve(
        tmp_path,
        monkeypatch,
        tools={"enabled": ["read_file", "recall"]},
        mcp={"servers": {"srv": python_server(approval_tools=["touch"])}},
        gateway={"http": {"keys": keys}},
    ) as served:
        yield served


async def _ask(api: Served, key: str, text: str = "hi") -> None:
    client = api.client(key)
    try:
        await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": text}]
        )
    finally:
        await client.close()


async def test_a_key_without_the_grant_never_sees_or_reaches_mcp_tools(
    keyed: Served, tmp_path: Path
) -> None:
    """alice (no grant): no srv__ tool and no tool_search in any request, and a call to one
    anyway is refused without reaching the server; bob (mcp:srv) sees all of srv's tools;
    carol (srv__echo) sees only that one."""
    marker = tmp_path / "alice-touched"
    keyed.llm.script(
        Turn(tool_calls=[_call("srv__touch", path=str(marker))]),
        Turn(tool_calls=[_call(TOOL_SEARCH, query="srv__touch touch file")]),
        Turn(text="ok"),
    )
    await _ask(keyed, "sk-user-alice")
    for request in keyed.llm.requests:
        assert not [n for n in _tools(request) if n.startswith("srv__") or n == TOOL_SEARCH]
        assert set(_tools(request)) == {"read_file", "recall"}
    refused, searched = _tool_results(keyed.llm.requests[-1])
    assert "is not available to http key alice" in refused
    assert searched.startswith("No tool matches")  # the search sees only alice's own tools
    assert not marker.exists()

    await _ask(keyed, "sk-user-bob")
    bob = _tools(keyed.llm.requests[-1])
    assert {"read_file", "srv__shout", "srv__echo", "srv__touch"} <= set(bob)
    assert "recall" not in bob

    await _ask(keyed, "sk-user-carol")
    assert set(_tools(keyed.llm.requests[-1])) == {"srv__echo"}


async def test_a_tool_marked_for_approval_is_refused_where_nobody_can_approve(
    keyed: Served, tmp_path: Path
) -> None:
    """bob is granted srv, but `touch` needs approval and an HTTP key cannot approve: refused,
    and the file is never made."""
    marker = tmp_path / "bob-touched"
    keyed.llm.script(Turn(tool_calls=[_call("srv__touch", path=str(marker))]), Turn(text="ok"))
    await _ask(keyed, "sk-user-bob")
    [result] = _tool_results(keyed.llm.requests[-1])
    assert "needs a person's approval" in result
    assert not marker.exists()


async def test_the_terminal_user_is_asked_and_the_call_runs_once_approved(tmp_path: Path) -> None:
    """The operator's approver sees the exact call; "once" lets it run."""
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Any:
        asked.append(request)
        return "once"

    marker = tmp_path / "operator-touched"
    async with FakeLLM() as fake:
        config = make_config(
            fake,
            tmp_path / "state.db",
            mcp={"servers": {"srv": python_server(approval="always")}},
        )
        runtime = await Runtime.start(config, tmp_path, {}, approver=approver)
        try:
            fake.script(Turn(tool_calls=[_call("srv__touch", path=str(marker))]), Turn(text="ok"))
            agent = await _agent(runtime)
            await agent.run_turn("touch it")
        finally:
            await runtime.aclose()
    assert marker.exists()
    [request] = asked
    assert request.kind == "tool" and request.subject.startswith("srv__touch {")
    assert str(marker) in request.subject


async def test_mcp_results_pass_the_redactor(keyed: Served) -> None:
    """A key a server returns never reaches the model or the store."""
    keyed.llm.script(Turn(tool_calls=[_call("srv__echo", text=f"key={SECRET}")]), Turn(text="ok"))
    await _ask(keyed, "sk-user-carol")
    sent = json.dumps(keyed.llm.requests[-1].json)
    assert SECRET not in sent and "[REDACTED]" in sent
    for info in await keyed.runtime.store.sessions.list_sessions():
        rows = await keyed.runtime.store.transcript.load_active(info.id)
        assert SECRET not in json.dumps(rows)


async def test_a_server_killed_during_a_turn_gives_that_turn_a_tool_error_and_comes_back(
    tmp_path: Path,
) -> None:
    """The model calls srv__pid, then srv__hang; the server is killed meanwhile: the turn ends
    normally with the model told which server went away; the next turn uses it again (a new
    process)."""
    async with FakeLLM() as fake:
        runtime = await _runtime(fake, tmp_path, mcp={"servers": {"srv": python_server()}})
        try:
            fake.script(
                Turn(tool_calls=[_call("srv__pid")]),
                Turn(tool_calls=[_call("srv__hang")]),
                Turn(text="the server failed"),
                Turn(tool_calls=[_call("srv__pid")]),
                Turn(text="back"),
            )
            agent = await _agent(runtime)
            turn = asyncio.create_task(agent.run_turn("pid, then hang"))
            await wait_until(lambda: len(fake.requests) >= 2, what="the pid result")
            first_pid = int(_tool_results(fake.requests[1])[-1])
            kill(first_pid)
            result = await asyncio.wait_for(turn, 60)
            assert result.reply == "the server failed"
            error = _tool_results(fake.requests[2])[-1]
            assert error.startswith("Error: MCP server 'srv'"), error
            connection = runtime.mcp.connection("srv") if runtime.mcp else None
            assert connection is not None
            await wait_until(lambda: bool(connection.tools), what="the reconnect")
            again = await agent.run_turn("pid again")
            assert again.reply == "back"
            assert int(_tool_results(fake.requests[4])[-1]) != first_pid
        finally:
            await runtime.aclose()
