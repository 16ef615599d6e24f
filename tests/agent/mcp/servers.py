"""Real MCP servers for the tests: the npm reference server and our SDK-built one (stdio, HTTP).

The reference server `@modelcontextprotocol/server-everything` is installed by `.ci/run` into
`tests/.npm` (pinned; `npm install --prefix tests/.npm --no-save ...@EVERYTHING_VERSION`). Where
it is missing the tests that need it skip, saying how to install it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.waits import SLOW_WAIT_S

ROOT = Path(__file__).resolve().parents[3]
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_BIN = ROOT / "tests" / ".npm" / "node_modules" / ".bin" / "mcp-server-everything"
"""Generous: a server's first start under load (two cores, seven helpers) takes seconds."""


def everything_server() -> dict[str, Any]:
    """The reference server's config entry (stdio), or skip saying how to get it."""
    if not EVERYTHING_BIN.exists():
        pytest.skip(
            "the MCP reference server is not installed: run `npm install --prefix tests/.npm "
            f"--no-save @modelcontextprotocol/server-everything@{EVERYTHING_VERSION}` (.ci/run does)"
        )
    return {"command": str(EVERYTHING_BIN), "args": ["stdio"], "connect_timeout_s": SLOW_WAIT_S}


def python_server(*args: str, **extra: Any) -> dict[str, Any]:
    """Our SDK-built server over stdio (`tests/fakes/mcp_server.py`)."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server", *args],
        "cwd": str(ROOT),
        "connect_timeout_s": SLOW_WAIT_S,
        **extra,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def http_server(port: int, *args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """Our SDK-built server on streamable HTTP at 127.0.0.1:`port`, up before this yields."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.mcp_server",
        "--http",
        str(port),
        *args,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_until(lambda: _accepts(port), timeout_s=SLOW_WAIT_S, what=f"MCP HTTP on {port}")
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


async def wait_until(
    condition: Callable[[], bool], *, timeout_s: float = SLOW_WAIT_S, what: str = "condition"
) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
