"""Codex app-server behind `Provider`: one codex thread per session, driven over JSON-RPC stdio.

The codex agent owns the thread's context, so a turn sends only the user's new words; Hermes'
transcript is a mirror. Compaction goes through the server: `compact_thread` sends
`thread/compact/start` and waits for the compaction turn; compactions the server runs on its own
during a turn are reported to the registered listeners.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import structlog

from agent.codex._app_server_turn import CompactionSeen, TurnCollector, error_kind_for
from agent.codex._stdio_rpc import RpcClosed, RpcError, StdioRpcClient
from agent.errors import BadRequest, CompactionRefused, ProviderError
from agent.messages import ChatMessage, content_text, is_real_user_message
from agent.providers._error_kinds import build_error
from agent.providers.base import OnText, ProviderReply, ProviderRequest, ProviderSettings, Usage

__all__ = [
    "DEFAULT_APP_SERVER_COMMAND",
    "CodexAppServerProvider",
    "CompactionListener",
    "ThreadCompaction",
    "new_user_text",
]

DEFAULT_APP_SERVER_COMMAND = ("codex", "app-server")
DEFAULT_THREAD_PARAMS: Mapping[str, Any] = {"approvalPolicy": "never"}
"""Hermes cannot answer codex's approval prompts mid-turn; the codex sandbox still applies."""
CLIENT_NAME = "hermes"
CLIENT_VERSION = "0.1.0"
INTERRUPT_TIMEOUT_S = 2.0

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadCompaction:
    """One compaction of the codex thread, requested by Hermes or run by the server itself."""

    thread_id: str
    turn_id: str
    item_id: str | None
    requested: bool
    """True when Hermes sent `thread/compact/start`; False when codex compacted on its own."""
    duration_ms: float = 0.0
    usage: Usage | None = None
    """Usage the server reported during the compaction turn, if any."""


CompactionListener = Callable[[ThreadCompaction, Sequence[ChatMessage]], Awaitable[None]]
"""Called with the compaction and the messages of the request whose turn it happened in."""


def new_user_text(messages: Sequence[ChatMessage]) -> str:
    """The user's words since the last assistant message: all codex has not seen yet."""
    texts: list[str] = []
    for msg in reversed(messages):
        if msg.get("role") == "assistant":
            break
        if is_real_user_message(msg):
            texts.append(content_text(msg))
    return "\n\n".join(reversed([t for t in texts if t]))


class CodexAppServerProvider:
    """`Provider` over a `codex app-server` child process; `async with` or `aclose()` ends it."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        command: Sequence[str] = DEFAULT_APP_SERVER_COMMAND,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        thread_params: Mapping[str, Any] = DEFAULT_THREAD_PARAMS,
        request_timeout_s: float = 30.0,
        compact_timeout_s: float = 600.0,
    ) -> None:
        """`settings.timeout_s` is a turn's idle deadline; `request_timeout_s` bounds each plain
        request (handshake, thread/start)."""
        self.name = settings.provider
        self._settings = settings
        self._thread_params = dict(thread_params)
        self._request_timeout_s = request_timeout_s
        self._compact_timeout_s = compact_timeout_s
        self._rpc = StdioRpcClient(command, env=env, cwd=cwd, on_server_request=_decline)
        self._started = False
        self._thread_id: str | None = None
        self._lock = asyncio.Lock()
        self._listeners: list[CompactionListener] = []

    @property
    def thread_id(self) -> str | None:
        return self._thread_id

    @property
    def pid(self) -> int | None:
        return self._rpc.pid

    @property
    def returncode(self) -> int | None:
        return self._rpc.returncode

    def add_compaction_listener(self, listener: CompactionListener) -> None:
        """Called after a turn in which codex compacted the thread on its own."""
        self._listeners.append(listener)

    async def __aenter__(self) -> CodexAppServerProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        """Run one codex turn with the new user text; tools are codex's own, not `request.tools`."""
        text = new_user_text(request.messages)
        if not text:
            raise BadRequest(self.name, request.model, "no new user message to send to codex")
        async with self._lock:
            thread_id = await self._ensure_thread(request.model)
            collector = await self._run_turn(
                "turn/start",
                {"threadId": thread_id, "input": [{"type": "text", "text": text}]},
                thread_id=thread_id,
                model=request.model,
                timeout_s=self._settings.timeout_s,
                on_text=on_text,
            )
        if collector.status != "completed":
            raise self._turn_error(collector, request.model)
        await self._report_native(collector, request.messages)
        message: ChatMessage = {"role": "assistant", "content": collector.text}
        return ProviderReply(
            message=message,
            usage=collector.usage or Usage(),
            stop_reason="end",
            model=request.model,
            raw={
                "thread_id": thread_id,
                "turn_id": collector.turn_id,
                "context_window": collector.context_window,
                "compactions": len(collector.compactions),
            },
        )

    async def compact_thread(self) -> ThreadCompaction:
        """Send `thread/compact/start` and wait for the compaction turn to complete.

        Raises CompactionRefused when there is no thread yet or the compaction turn failed,
        ProviderError when the server is unreachable or too slow.
        """
        async with self._lock:
            thread_id = self._thread_id
            if thread_id is None:
                raise CompactionRefused("no codex thread yet: nothing to compact")
            started = time.monotonic()
            collector = await self._run_turn(
                "thread/compact/start",
                {"threadId": thread_id},
                thread_id=thread_id,
                model=self._settings.model,
                timeout_s=self._compact_timeout_s,
                on_text=None,
            )
        if collector.status != "completed" or not collector.compactions:
            detail = collector.error_message or f"compaction turn ended {collector.status!r}"
            raise CompactionRefused(f"codex did not compact the thread: {detail}")
        seen = collector.compactions[-1]
        event = ThreadCompaction(
            thread_id=thread_id,
            turn_id=seen.turn_id,
            item_id=seen.item_id,
            requested=True,
            duration_ms=(time.monotonic() - started) * 1000,
            usage=collector.usage,
        )
        log.info(
            "codex_thread_compacted", thread_id=thread_id, duration_ms=round(event.duration_ms)
        )
        return event

    async def aclose(self) -> None:
        """Stop the app-server process (killed if it does not exit at once)."""
        await self._rpc.aclose()

    async def _ensure_thread(self, model: str) -> str:
        if not self._started:
            await self._start(model)
        if self._thread_id is None:
            params = {**self._thread_params, "model": model}
            result = await self._call("thread/start", params, model)
            thread = (result or {}).get("thread") or {}
            if not thread.get("id"):
                raise build_error("bad_request", self.name, model, "thread/start returned no id")
            self._thread_id = str(thread["id"])
            log.info("codex_thread_started", thread_id=self._thread_id)
        return self._thread_id

    async def _start(self, model: str) -> None:
        try:
            await self._rpc.start()
        except OSError as exc:
            raise build_error(
                "unavailable", self.name, model, f"cannot start codex: {exc}"
            ) from exc
        client_info = {"name": CLIENT_NAME, "title": "Hermes", "version": CLIENT_VERSION}
        await self._call("initialize", {"clientInfo": client_info}, model)
        with self._errors(model):
            await self._rpc.notify("initialized")
        self._started = True

    async def _call(self, method: str, params: dict[str, Any], model: str) -> Any:
        with self._errors(model):
            return await self._rpc.request(method, params, timeout_s=self._request_timeout_s)

    async def _run_turn(
        self,
        method: str,
        params: dict[str, Any],
        *,
        thread_id: str,
        model: str,
        timeout_s: float,
        on_text: OnText | None,
    ) -> TurnCollector:
        """Send the request that starts a turn; fold notifications until `turn/completed`.

        `timeout_s` is an idle deadline: codex turns run commands for minutes, so every
        notification from the server pushes it back; only silence ends the turn.
        """
        collector = TurnCollector(thread_id=thread_id)
        queue = self._rpc.subscribe()
        try:
            with self._errors(model):
                async with asyncio.timeout(timeout_s) as deadline:
                    result = await self._rpc.request(method, params, timeout_s=timeout_s)
                    collector.turn_id = _turn_id_of(result) or collector.turn_id
                    while not collector.done:
                        note = await queue.get()
                        if note is None:
                            raise RpcClosed(f"{method}: the server exited mid-turn")
                        deadline.reschedule(asyncio.get_running_loop().time() + timeout_s)
                        delta = collector.add(note)
                        if delta and on_text is not None:
                            await on_text(delta)
        except ProviderError as exc:
            if exc.__cause__ is not None and isinstance(exc.__cause__, TimeoutError):
                await self._interrupt(thread_id, collector.turn_id)
            raise
        finally:
            self._rpc.unsubscribe(queue)
        return collector

    async def _interrupt(self, thread_id: str, turn_id: str | None) -> None:
        """Best effort: ask codex to stop a turn we gave up on."""
        if turn_id is None or not self._rpc.is_running:
            return
        try:
            await self._rpc.request(
                "turn/interrupt",
                {"threadId": thread_id, "turnId": turn_id},
                timeout_s=INTERRUPT_TIMEOUT_S,
            )
        except (RpcError, RpcClosed, TimeoutError) as exc:
            log.debug("codex_interrupt_failed", thread_id=thread_id, error=type(exc).__name__)

    async def _report_native(
        self, collector: TurnCollector, messages: Sequence[ChatMessage]
    ) -> None:
        for seen in collector.compactions:
            event = _native_event(seen, collector.usage)
            log.info(
                "codex_native_compaction_seen", thread_id=event.thread_id, turn_id=event.turn_id
            )
            for listener in self._listeners:
                await listener(event, messages)

    def _turn_error(self, collector: TurnCollector, model: str) -> ProviderError:
        kind = error_kind_for(collector.status, collector.error_info)
        detail = f"turn {collector.status}: {collector.error_message or collector.error_info}"
        return build_error(kind, self.name, model, detail)

    def _errors(self, model: str) -> AbstractContextManager[None]:
        return _map_errors(self.name, model)


@contextmanager
def _map_errors(provider: str, model: str) -> Iterator[None]:
    """Translate RPC failures into `agent.errors`, once, here."""
    try:
        yield
    except TimeoutError as exc:
        raise build_error("unavailable", provider, model, "codex app-server timed out") from exc
    except RpcClosed as exc:
        raise build_error("unavailable", provider, model, str(exc)) from exc
    except RpcError as exc:
        raise build_error("bad_request", provider, model, str(exc)) from exc


async def _decline(method: str, params: dict[str, Any]) -> Any:
    """Approval prompts are declined (Hermes starts threads with approvalPolicy=never)."""
    if method.endswith("requestApproval"):
        log.warning("codex_approval_declined", method=method)
        return {"decision": "decline"}
    raise LookupError(method)


def _turn_id_of(result: Any) -> str | None:
    turn = (result or {}).get("turn") if isinstance(result, dict) else None
    return str(turn["id"]) if isinstance(turn, dict) and turn.get("id") else None


def _native_event(seen: CompactionSeen, usage: Usage | None) -> ThreadCompaction:
    return ThreadCompaction(
        thread_id=seen.thread_id,
        turn_id=seen.turn_id,
        item_id=seen.item_id,
        requested=False,
        usage=usage,
    )
