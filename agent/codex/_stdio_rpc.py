"""JSON-RPC 2.0 over a subprocess's stdio, as `codex app-server` speaks it (JSONL, no "jsonrpc").

One reader task parses stdout: responses resolve their pending request, notifications fan out to
subscriber queues, server-initiated requests go to a handler whose result is sent back. Every
write and every request has a deadline; `aclose` closes stdin, then kills the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import structlog

__all__ = ["Notification", "RpcClosed", "RpcError", "StdioRpcClient"]

LINE_LIMIT_BYTES = 32 * 1024 * 1024
"""Items such as command output can make a single line large."""
_CLOSED = None

Notification = dict[str, Any]
"""`{"method": str, "params": dict}`; `None` in a subscriber queue means the process is gone."""
ServerRequestHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]

log = structlog.get_logger(__name__)


class RpcError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: error {code}: {message}")
        self.method = method
        self.code = code
        self.message = message


class RpcClosed(Exception):
    """The process exited or closed stdout; nothing more will arrive."""


class StdioRpcClient:
    """A client for one server process; `await start()`, then `request`/`notify`/`subscribe`."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        write_timeout_s: float = 10.0,
        close_grace_s: float = 0.5,
        on_server_request: ServerRequestHandler | None = None,
    ) -> None:
        self._argv = list(argv)
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._write_timeout_s = write_timeout_s
        self._close_grace_s = close_grace_s
        self._on_server_request = on_server_request
        self._process: asyncio.subprocess.Process | None = None
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._subscribers: list[asyncio.Queue[Notification | None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._ids = itertools.count(1)
        self._write_lock = asyncio.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process is not None else None

    @property
    def is_running(self) -> bool:
        return self._process is not None and not self._closed

    async def start(self) -> None:
        """Spawn the process and start reading its output."""
        self._process = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._env,
            cwd=self._cwd,
            limit=LINE_LIMIT_BYTES,
        )
        self._tasks = [
            asyncio.create_task(self._read_stdout(), name=f"rpc-stdout-{self._process.pid}"),
            asyncio.create_task(self._drain_stderr(), name=f"rpc-stderr-{self._process.pid}"),
        ]
        log.debug("rpc_process_started", pid=self._process.pid, program=self._argv[0])

    async def request(self, method: str, params: Any = None, *, timeout_s: float) -> Any:
        """Send a request and wait (at most `timeout_s`) for its result. Raises RpcError,
        RpcClosed or TimeoutError."""
        if self._closed:
            raise RpcClosed(f"{method}: the server process is gone")
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (method, future)
        try:
            async with asyncio.timeout(timeout_s):
                await self._write({"id": request_id, "method": method, "params": params or {}})
                return await future
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)

    def subscribe(self) -> asyncio.Queue[Notification | None]:
        """A queue receiving every notification from now on (None once the process is gone)."""
        queue: asyncio.Queue[Notification | None] = asyncio.Queue()
        if self._closed:
            queue.put_nowait(_CLOSED)
        self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Notification | None]) -> None:
        with contextlib.suppress(ValueError):
            self._subscribers.remove(queue)

    async def aclose(self) -> None:
        """Close stdin, give the process a moment, then kill it; stop the reader tasks."""
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None and not process.stdin.is_closing():
                process.stdin.close()
            try:
                async with asyncio.timeout(self._close_grace_s):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
            log.debug("rpc_process_stopped", pid=process.pid, returncode=process.returncode)
        self._mark_closed()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:  # `wait` raises only when our caller is cancelled, never for the tasks' ends
            await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled():
                task.result()  # a reader that failed on its own: that goes on up

    async def _write(self, message: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None or self._closed:
            raise RpcClosed("the server process is not running")
        line = json.dumps(message, separators=(",", ":")) + "\n"
        async with self._write_lock, asyncio.timeout(self._write_timeout_s):
            try:
                process.stdin.write(line.encode())
                await process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise RpcClosed("the server process closed its stdin") from exc

    async def _read_stdout(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        try:
            while line := await stdout.readline():
                await self._dispatch(line)
        except (ValueError, asyncio.LimitOverrunError) as exc:
            log.warning("rpc_stdout_unreadable", error=str(exc))
        finally:
            self._mark_closed()

    async def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            log.debug("rpc_line_skipped", size=len(line))
            return
        if not isinstance(message, dict):
            return
        if "method" in message and "id" in message:
            await self._answer(message)
        elif "method" in message:
            params = message.get("params")
            note = {
                "method": message["method"],
                "params": params if isinstance(params, dict) else {},
            }
            for queue in list(self._subscribers):
                queue.put_nowait(note)
        elif "id" in message:
            self._resolve(message)

    def _resolve(self, message: dict[str, Any]) -> None:
        entry = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
        if entry is None or entry[1].done():
            return
        method, future = entry
        error = message.get("error")
        if isinstance(error, dict):
            code = int(error.get("code") or 0)
            future.set_exception(RpcError(method, code, str(error.get("message") or "")))
        else:
            future.set_result(message.get("result"))

    async def _answer(self, message: dict[str, Any]) -> None:
        """A server-initiated request: the handler's result, or method-not-found."""
        method, request_id = str(message["method"]), message["id"]
        raw = message.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if self._on_server_request is None:
            reply: dict[str, Any] = {"id": request_id, "error": {"code": -32601, "message": method}}
        else:
            try:
                result = await self._on_server_request(method, params)
                reply = {"id": request_id, "result": result}
            except LookupError:
                reply = {"id": request_id, "error": {"code": -32601, "message": method}}
        with contextlib.suppress(RpcClosed, TimeoutError):
            await self._write(reply)

    async def _drain_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        while line := await self._process.stderr.readline():
            log.debug("rpc_stderr_line", size=len(line))

    def _mark_closed(self) -> None:
        if self._closed:
            return
        self._closed = True
        for method, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(RpcClosed(f"{method}: the server process exited"))
        for queue in self._subscribers:
            queue.put_nowait(_CLOSED)
