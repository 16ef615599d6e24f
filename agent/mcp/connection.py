"""One MCP server, kept connected: start it, list its tools, call them, reconnect with backoff.

The official SDK (`mcp`) speaks the protocol; this module only supervises. A connection lives in
one task (the SDK's transports and session are async context managers that must be entered and
left by the same task); calls come from turn tasks and share the session. When the server cannot
start or dies, the connection logs one warning, its tools vanish from `tools`, and it retries
after 0.5 s, 1 s, 2 s, ... up to a minute. A call never raises anything but `ToolError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeAlias

import structlog

from agent.config_tools import McpServerConfig
from agent.errors import ToolError

if TYPE_CHECKING:
    import mcp_types
    from mcp import ClientSession

__all__ = ["BACKOFF_MAX_S", "BACKOFF_START_S", "McpConnection", "ServerState", "ServerStatus"]

log = structlog.get_logger(__name__)

BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 60.0
STOP_TIMEOUT_S = 10.0
"""How long `aclose` lets the supervisor stop the server on its own before cancelling it."""
PING_INTERVAL_S = 30.0
"""How often an idle connection checks that its server still answers."""
PAGE_LIMIT = 50
"""At most this many pages of tools/list (a server that pages forever cannot hang a start)."""

ServerState: TypeAlias = Literal["starting", "connected", "failed", "stopped"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerStatus:
    """What `hermes mcp list` shows of one server."""

    name: str
    transport: Literal["stdio", "http"]
    state: ServerState
    tools: tuple[str, ...]
    """The server's own tool names while connected."""
    error: str | None = None
    """Why the last attempt failed, in one line (no secrets: no headers, no environment)."""
    attempts: int = 0
    """Failed attempts since the last success."""


class McpConnection:
    """One configured server. `start()` it, `await wait_settled()`, then `call()`; `aclose()`."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        environ: Mapping[str, str],
        log_dir: Path | None = None,
        backoff_start_s: float = BACKOFF_START_S,
        ping_interval_s: float = PING_INTERVAL_S,
    ) -> None:
        self.name = name
        self.config = config
        self._environ = environ
        self._log_dir = log_dir
        self._backoff_start_s = backoff_start_s
        self._ping_interval_s = ping_interval_s
        self._session: ClientSession | None = None
        self._tools: tuple[mcp_types.Tool, ...] = ()
        self._state: ServerState = "starting"
        self._error: str | None = None
        self._attempts = 0
        self._generation = 0
        self._settled = asyncio.Event()
        """Set after the first attempt, whatever its outcome."""
        self._stop = asyncio.Event()
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def generation(self) -> int:
        """Counts connections made: tools built from one generation belong to it."""
        return self._generation

    @property
    def tools(self) -> tuple[mcp_types.Tool, ...]:
        """The server's tools while connected; () otherwise."""
        return self._tools if self._state == "connected" else ()

    def status(self) -> ServerStatus:
        return ServerStatus(
            name=self.name,
            transport=self.config.transport,
            state=self._state,
            tools=tuple(t.name for t in self.tools),
            error=self._error,
            attempts=self._attempts,
        )

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def wait_settled(self, timeout_s: float) -> None:
        """Wait until the first attempt connected or failed (at most `timeout_s`)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._settled.wait()

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call `tool` (the server's own name) within the server's `timeout_s`."""
        from mcp.shared.exceptions import MCPError

        session = self._session
        if session is None or self._state != "connected":
            raise ToolError(
                f"MCP server {self.name!r} is not connected ({self._error or self._state}); "
                "it is retrying in the background"
            )
        timeout_s = self.config.timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.name!r} did not answer {tool} within {timeout_s:g} s"
            ) from None
        except MCPError as exc:
            if _is_connection_closed(exc):
                self._lost.set()
                raise ToolError(
                    f"MCP server {self.name!r} went away during {tool} (connection closed); "
                    "it is reconnecting, try again shortly"
                ) from None
            raise ToolError(
                f"MCP server {self.name!r} refused {tool}: {exc.error.message}"
            ) from None
        import mcp_types

        if not isinstance(result, mcp_types.CallToolResult):
            raise ToolError(f"MCP server {self.name!r} answered {tool} with an unsupported result")
        return result

    async def aclose(self) -> None:
        """Stop the server (the SDK closes stdin, then terminates it) and the supervisor."""
        self._stop.set()
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=STOP_TIMEOUT_S)
        if not done:  # stuck (a connect that ignores the stop): cancel it and wait it out
            task.cancel()
            await asyncio.wait({task})
        self._state = "stopped"

    # ---- the supervisor -------------------------------------------------------------------

    async def _supervise(self) -> None:
        delay = self._backoff_start_s
        while not self._stop.is_set():
            self._lost.clear()
            was_connected = False
            try:
                was_connected = await self._connect_once()
            except Exception as exc:  # a task root: any failure is one warning, then a retry
                self._fail(_describe(exc))
            else:
                if not self._stop.is_set():
                    self._fail("the connection was lost")
            if self._stop.is_set():
                break
            delay = self._backoff_start_s if was_connected else min(delay * 2, BACKOFF_MAX_S)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stop.wait()
        self._state = "stopped"

    async def _connect_once(self) -> bool:
        """Connect, list tools, then hold the connection until it is lost or stopped. Returns
        whether it got connected."""
        from mcp import ClientSession

        connected = False
        with self._errlog() as errlog:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(errlog))
                session = await stack.enter_async_context(ClientSession(read, write))
                async with asyncio.timeout(self.config.connect_timeout_s):
                    await session.initialize()
                    tools = await _list_all_tools(session)
                self._session, self._tools = session, tools
                self._state, self._error, self._attempts = "connected", None, 0
                self._generation += 1
                self._settled.set()
                connected = True
                log.info("mcp_server_connected", server=self.name, tools=len(tools))
                try:
                    await self._hold(session)
                finally:
                    self._session, self._tools = None, ()
        return connected

    async def _hold(self, session: ClientSession) -> None:
        """Return when the server is gone (a call saw the connection close, a ping failed) or
        the connection is being stopped."""
        while not self._stop.is_set() and not self._lost.is_set():
            waits = [asyncio.ensure_future(e.wait()) for e in (self._stop, self._lost)]
            try:
                await asyncio.wait(
                    waits, timeout=self._ping_interval_s, return_when="FIRST_COMPLETED"
                )
            finally:
                for w in waits:
                    w.cancel()
            if self._stop.is_set() or self._lost.is_set():
                return
            try:
                async with asyncio.timeout(min(10.0, self._ping_interval_s)):
                    await session.send_ping()
            except Exception:  # no answer: treat as gone and reconnect
                return

    def _fail(self, reason: str) -> None:
        first = self._state in ("starting", "connected")
        self._state, self._error = "failed", reason
        self._attempts += 1
        self._settled.set()
        if first:  # one warning per outage; the retries are quiet
            log.warning("mcp_server_unavailable", server=self.name, reason=reason)
        else:
            log.debug("mcp_server_retry_failed", server=self.name, attempts=self._attempts)

    def _transport(self, errlog: TextIO) -> contextlib.AbstractAsyncContextManager[Any]:
        config = self.config
        if config.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=config.command, args=config.args, env=config.env or None, cwd=config.cwd
            )
            return stdio_client(params, errlog=errlog)
        assert config.url is not None
        return _http_transport(config.url, self._headers())

    def _headers(self) -> dict[str, str]:
        headers = dict(self.config.headers)
        if (env := self.config.bearer_token_env) is not None:
            token = self._environ.get(env)
            if not token:
                raise ToolError(f"the environment variable {env} (bearer_token_env) is not set")
            headers["Authorization"] = f"Bearer {token}"
        return headers

    @contextlib.contextmanager
    def _errlog(self) -> Iterator[TextIO]:
        """Where a stdio server's stderr goes: HERMES_HOME/logs/mcp-NAME.log, else nowhere."""
        if self._log_dir is None:
            with open(os.devnull, "w", encoding="utf-8") as sink:
                yield sink
            return
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with open(self._log_dir / f"mcp-{self.name}.log", "a", encoding="utf-8") as sink:
            sink.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.name}\n")
            sink.flush()
            yield sink


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            yield streams


async def _list_all_tools(session: ClientSession) -> tuple[mcp_types.Tool, ...]:
    import mcp_types

    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(PAGE_LIMIT):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


def _is_connection_closed(exc: Exception) -> bool:
    from mcp_types import CONNECTION_CLOSED

    return getattr(exc, "code", None) == CONNECTION_CLOSED


def _describe(exc: BaseException) -> str:
    """One line for a failed attempt: the innermost meaningful exception of a group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer within connect_timeout_s"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__
