"""Measure what tools cost in context: the first request of a one-word turn, per tool setup.

Prints JSON. Assumptions: the Anthropic Messages wire against the fake model on 127.0.0.1;
the default system prompt; the user says "hi"; a request's size is its JSON body re-encoded
compactly (`separators=(",", ":")`, UTF-8), which is what the SDK sends give or take whitespace;
a tool's own cost is its entry in the request's `tools` list, encoded the same way. MCP servers:
our SDK-built test server (9 tools, `--many 60` adds 60) and, when installed in tests/.npm, the
npm reference server `@modelcontextprotocol/server-everything` (13 tools).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.config import TOOL_NAMES, HermesConfig  # noqa: E402
from cli.runtime import Runtime  # noqa: E402
from sim.llm_server import FakeLLM  # noqa: E402

EVERYTHING = ROOT / "tests" / ".npm" / "node_modules" / ".bin" / "mcp-server-everything"


def _py_server(*args: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server", *args],
        "cwd": str(ROOT),
    }


def _setups() -> dict[str, dict[str, Any]]:
    builtins = {"enabled": list(TOOL_NAMES)}
    web = {"enabled": [*TOOL_NAMES, "web_fetch", "web_search"]}
    setups: dict[str, dict[str, Any]] = {
        "no tools": {"tools": {"enabled": []}},
        "default (the built-ins)": {"tools": builtins},
        "built-ins + web tools": {"tools": web},
        "built-ins + test server (9 tools, under the threshold)": {
            "tools": builtins,
            "mcp": {"servers": {"srv": _py_server()}},
        },
        "built-ins + 69 MCP tools, deferred (index + tool_search)": {
            "tools": builtins,
            "mcp": {"servers": {"srv": _py_server("--many", "60")}},
        },
        "built-ins + 69 MCP tools, all schemas sent (defer_after: 1000)": {
            "tools": builtins,
            "mcp": {"servers": {"srv": _py_server("--many", "60")}, "defer_after": 1000},
        },
    }
    if EVERYTHING.exists():
        setups["built-ins + server-everything (13 tools, deferred)"] = {
            "tools": builtins,
            "mcp": {"servers": {"ev": {"command": str(EVERYTHING)}}},
        }
        setups["built-ins + server-everything (13 tools, all sent)"] = {
            "tools": builtins,
            "mcp": {"servers": {"ev": {"command": str(EVERYTHING)}}, "defer_after": 1000},
        }
    return setups


def _compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def _measure(fake: FakeLLM, sections: dict[str, Any], home: Path) -> dict[str, Any]:
    data: dict[str, Any] = {
        "model": {
            "provider": "anthropic",
            "default": "claude-sonnet-4-6",
            "base_url": fake.anthropic_base_url,
            "api_key": "k",
            "context_length": 200_000,
        },
        "state": {"url": f"sqlite+aiosqlite:///{home / 'state.db'}"},
        "compression": {"micro_compact": False},
        **sections,
    }
    runtime = await Runtime.start(HermesConfig.model_validate(data), home, {})
    try:
        info = await runtime.store.sessions.create_session(platform="cli")
        agent = await runtime.open_agent(info.id)
        before = len(fake.requests)
        await agent.run_turn("hi")
        body = fake.requests[before].json or {}
    finally:
        await runtime.aclose()
    tools = body.get("tools", [])
    return {
        "request_bytes": _compact(body),
        "tools_bytes": _compact(tools),
        "tools_sent": len(tools),
        "per_tool_bytes": {t["name"]: _compact(t) for t in tools} if len(tools) <= 8 else None,
    }


async def main() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    results: dict[str, Any] = {}
    async with FakeLLM() as fake:
        for name, sections in _setups().items():
            with tempfile.TemporaryDirectory() as tmp:
                results[name] = await _measure(fake, sections, Path(tmp))
    print(
        json.dumps({"assumptions": __doc__.split("Assumptions: ")[1].strip(), **results}, indent=2)
    )


if __name__ == "__main__":
    asyncio.run(main())
