"""Stopwatches around the runtime's store and provider, so the replay can split its overhead.

Both are transparent proxies: every attribute passes through; coroutine methods are timed. The
provider's time excludes what the sim server spent answering, which leaves the client side (SDK
request building, HTTP, stream parsing) — the part of a model call that is the runtime's cost.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

from agent.providers.base import OnText, ProviderReply, ProviderRequest
from sim.llm_server import FakeLLM

__all__ = ["TimedProvider", "TimedStore"]


class TimedStore:
    """A store whose awaited methods add their wall time to `spent_s`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.spent_s = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await attr(*args, **kwargs)
            finally:
                self.spent_s += time.perf_counter() - started

        return timed


class TimedProvider:
    """A provider whose `complete` adds its client-side time (wall minus server time) to `spent_s`."""

    def __init__(self, inner: Any, server: FakeLLM) -> None:
        self._inner = inner
        self._server = server
        self.name = inner.name
        self.spent_s = 0.0

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        started, busy = time.perf_counter(), self._server.busy_s
        try:
            reply: ProviderReply = await self._inner.complete(request, on_text=on_text)
            return reply
        finally:
            wall = time.perf_counter() - started
            self.spent_s += wall - (self._server.busy_s - busy)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
