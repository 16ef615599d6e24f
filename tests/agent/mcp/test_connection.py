"""The MCP client against real servers nobody here wrote the protocol for: the npm reference
server over stdio, and an SDK-built server over stdio and streamable HTTP.

Contract (MCP specification 2025-06-18, "Tools" and "Lifecycle"): after `initialize`,
`tools/list` gives each tool's name, description and inputSchema; `tools/call` answers `content`
blocks (text, image, resource links), `structuredContent` when the tool declares an output
schema, and `isError: true` when the tool itself failed (a protocol error is a JSON-RPC error
instead). A stdio server is a subprocess; a streamable-HTTP server is one endpoint URL.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.config_tools import McpConfig
from agent.errors import ToolError
from agent.mcp import McpHub
from agent.tools.registry import ToolContext, ToolRegistry
from tests.agent.mcp.servers import (
    everything_server,
    free_port,
    http_server,
    kill,
    python_server,
    wait_until,
)

CTX = ToolContext(session_id="s1")


def _call(name: str, **args: Any) -> Any:
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


async def _hub(**servers: dict[str, Any]) -> McpHub:
    return await McpHub.start(
        McpConfig.model_validate({"servers": servers}), {}, backoff_start_s=0.1
    )


async def test_the_reference_server_lists_its_tools_and_answers_calls() -> None:
    """server-everything over stdio: its tools appear as `ev__*`; echo and get-sum answer
    text, get-structured-content answers structured content, get-tiny-image is described."""
    hub = await _hub(ev=everything_server())
    try:
        [status] = hub.statuses()
        assert status.state == "connected", status
        assert {"echo", "get-sum", "get-structured-content", "get-tiny-image"} <= set(status.tools)
        registry = ToolRegistry(sources=[hub])
        assert "ev__echo" in registry.names()
        assert await registry.run(_call("ev__echo", message="héllo ✓"), CTX) == "Echo: héllo ✓"
        assert "5" in await registry.run(_call("ev__get-sum", a=2, b=3), CTX)
        weather = await registry.run(_call("ev__get-structured-content", location="Chicago"), CTX)
        assert set(json.loads(weather.splitlines()[0])) >= {"temperature", "conditions"}
        image = await registry.run(_call("ev__get-tiny-image"), CTX)
        assert "[image: image/png" in image and "not shown" in image
        bad = await registry.run(_call("ev__get-sum", a="two"), CTX)
        assert bad.startswith("Error:")
    finally:
        await hub.aclose()
    assert hub.statuses()[0].state == "stopped"


async def test_calls_with_arguments_structured_and_error_results() -> None:
    """Our SDK server over stdio: text, structured content (as JSON), an error result as
    `Error: <the server's reason>`."""
    hub = await _hub(py=python_server())
    try:
        registry = ToolRegistry(sources=[hub])
        assert await registry.run(_call("py__shout", text="straße"), CTX) == "STRASSE"
        assert json.loads(await registry.run(_call("py__add", a=2, b=40), CTX)) == {"total": 42}
        failed = await registry.run(_call("py__fail", why="because"), CTX)
        assert failed.startswith("Error: ") and failed.endswith("failed on purpose: because")
        schema = next(s for s in registry.specs() if s.name == "py__add").parameters
        assert schema["required"] == ["a", "b"]
    finally:
        await hub.aclose()


async def test_a_hanging_call_times_out_and_the_server_stays_usable() -> None:
    """`hang` never answers: after the server's timeout_s the model is told so, and the next
    call on the same connection works."""
    hub = await _hub(py=python_server(timeout_s=1.0))
    try:
        registry = ToolRegistry(sources=[hub])
        started = time.monotonic()
        result = await registry.run(_call("py__hang"), CTX)
        assert result == "Error: MCP server 'py' did not answer hang within 1 s"
        assert time.monotonic() - started < 10
        assert await registry.run(_call("py__shout", text="still here"), CTX) == "STILL HERE"
    finally:
        await hub.aclose()


async def test_a_server_killed_mid_call_is_a_clear_error_then_it_reconnects() -> None:
    """SIGKILL during a call: that call ends at once with a tool error naming the server; its
    tools vanish while it is down; it restarts (a new process) and serves again."""
    hub = await _hub(py=python_server(timeout_s=60.0))
    try:
        registry = ToolRegistry(sources=[hub])
        first_pid = int(await registry.run(_call("py__pid"), CTX))
        connection = hub.connection("py")
        assert connection is not None
        generation = connection.generation
        pending = asyncio.create_task(registry.run(_call("py__hang"), CTX))
        await asyncio.sleep(0.3)  # let the call reach the server; nothing is asserted on time
        kill(first_pid)
        result = await asyncio.wait_for(pending, 20)
        assert result.startswith("Error: MCP server 'py' went away during hang"), result
        await wait_until(
            lambda: connection.generation > generation and bool(connection.tools),
            what="the reconnect",
        )
        second_pid = int(await registry.run(_call("py__pid"), CTX))
        assert second_pid != first_pid
    finally:
        await hub.aclose()


async def test_a_server_that_cannot_start_is_one_warning_and_no_tools(tmp_path: Path) -> None:
    """A missing program: start returns, one warning names the server, its tools are absent,
    the other server works; retries stay quiet and count up."""
    with capture_logs() as logs:
        hub = await McpHub.start(
            McpConfig.model_validate(
                {"servers": {"gone": {"command": str(tmp_path / "nope")}, "py": python_server()}}
            ),
            {},
            backoff_start_s=0.05,
        )
        try:
            gone = next(s for s in hub.statuses() if s.name == "gone")
            assert gone.state == "failed" and "FileNotFoundError" in (gone.error or "")
            registry = ToolRegistry(sources=[hub])
            assert all(not n.startswith("gone__") for n in registry.names())
            assert "py__shout" in registry.names()
            await wait_until(lambda: hub.statuses()[0].attempts >= 3, what="three retries")
            answer = await registry.run(_call("gone__anything"), CTX)
            assert answer.startswith("Error: unknown tool 'gone__anything'")
        finally:
            await hub.aclose()
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [(w["event"], w["server"]) for w in warnings] == [("mcp_server_unavailable", "gone")]


async def test_a_call_to_a_server_that_is_down_says_so() -> None:
    """The connection refuses calls while not connected, with a reason (a ToolError)."""
    hub = await _hub(py=python_server())
    connection = hub.connection("py")
    assert connection is not None
    await hub.aclose()
    with pytest.raises(ToolError, match="is not connected"):
        await connection.call("shout", {"text": "x"})


async def test_streamable_http_with_a_bearer_token_from_the_environment() -> None:
    """An HTTP server built with MCPServer: tools listed and called; the token named by
    bearer_token_env reaches the server as `Authorization: Bearer ...`."""
    port = free_port()
    async with http_server(port):
        config = McpConfig.model_validate(
            {
                "servers": {
                    "web": {
                        "url": f"http://127.0.0.1:{port}/mcp",
                        "bearer_token_env": "WEB_MCP_TOKEN",
                        "headers": {"X-Client": "hermes"},
                    }
                }
            }
        )
        hub = await McpHub.start(config, {"WEB_MCP_TOKEN": "tok-123"}, backoff_start_s=0.1)
        try:
            [status] = hub.statuses()
            assert status.state == "connected", status
            registry = ToolRegistry(sources=[hub])
            assert await registry.run(_call("web__whoami"), CTX) == "Bearer tok-123"
            assert json.loads(await registry.run(_call("web__add", a=1, b=2), CTX)) == {"total": 3}
        finally:
            await hub.aclose()


async def test_an_http_server_killed_mid_session_comes_back_when_it_restarts() -> None:
    """The HTTP server dies during a call: a clear tool error; once a server listens on the
    port again, the client reconnects by itself."""
    port = free_port()
    config = McpConfig.model_validate(
        {"servers": {"web": {"url": f"http://127.0.0.1:{port}/mcp", "timeout_s": 30}}}
    )
    async with http_server(port) as process:
        hub = await McpHub.start(config, {}, backoff_start_s=0.1)
        registry = ToolRegistry(sources=[hub])
        connection = hub.connection("web")
        assert connection is not None
        generation = connection.generation
        pending = asyncio.create_task(registry.run(_call("web__hang"), CTX))
        await asyncio.sleep(0.3)
        process.kill()
        result = await asyncio.wait_for(pending, 40)
    try:
        assert result.startswith("Error: MCP server 'web'"), result
        async with http_server(port):
            await wait_until(lambda: connection.generation > generation, what="the reconnect")
            assert await registry.run(_call("web__shout", text="back"), CTX) == "BACK"
    finally:
        await hub.aclose()


async def test_a_missing_bearer_token_variable_is_a_failed_server_not_a_crash() -> None:
    config = McpConfig.model_validate(
        {"servers": {"web": {"url": "http://127.0.0.1:9/mcp", "bearer_token_env": "NOPE"}}}
    )
    hub = await McpHub.start(config, {}, backoff_start_s=0.1)
    try:
        [status] = hub.statuses()
        assert status.state == "failed"
        assert "NOPE" in (status.error or "")
    finally:
        await hub.aclose()
