"""Meters around the runtime's store and model calls: wall-time stopwatches and simulated time.

`TimedStore` is a transparent proxy: every attribute passes through, and the store's role objects
(`store.transcript`, `store.locks`, ...) are proxied the same way; coroutine methods are timed
and marked in flight for the pump, and so are the entry and exit of the async context managers
their methods return (the session lock: a lease written to the database). `TimedModelCalls` is installed on the provider objects
themselves (the agent's provider, and the summarizer that the context engine and micro-compaction
hold), so every model call of the runtime passes through it however the runtime wires its
summarizer: it marks the HTTP exchange in flight, then sleeps the call's modeled seconds on the
simulated clock (`sim.latency`), and records the call as a `CallSpan`. Its wall time excludes
what the sim server spent answering, which leaves the client side (SDK request building, HTTP,
stream parsing) — the part of a model call that is the runtime's cost.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.providers.base import OnText, ProviderReply, ProviderRequest, Usage
from sim.latency import LatencyModel, Role
from sim.llm_server import FakeLLM
from sim.simclock import Activity, SimSleep

__all__ = ["CallSpan", "TimedModelCalls", "TimedStore", "role_of"]

Complete = Callable[..., Any]
_ROLES = frozenset(
    {"sessions", "transcript", "ledger", "search", "locks", "meta", "memory", "jobs"}
)
"""The store's role objects (`state.contract.SessionStore`): their methods are timed too."""


class TimedStore:
    """A store whose awaited methods add their wall time to `spent_s`."""

    def __init__(
        self, inner: Any, activity: Activity | None = None, *, of: TimedStore | None = None
    ) -> None:
        self._inner = inner
        self._activity = activity or Activity()
        self._of = of
        """The store this proxies a role of: its time is counted there."""
        self.spent_s = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name in _ROLES and self._of is None:
            return TimedStore(attr, self._activity, of=self)
        if not inspect.iscoroutinefunction(attr):
            if not callable(attr):
                return attr

            def called(*args: Any, **kwargs: Any) -> Any:
                result = attr(*args, **kwargs)
                return _TimedContext(result, self) if hasattr(result, "__aenter__") else result

            return called

        async def timed(*args: Any, **kwargs: Any) -> Any:
            return await self._timed(attr(*args, **kwargs))

        return timed

    async def _timed(self, work: Any) -> Any:
        if self._of is not None:
            return await self._of._timed(work)
        started = time.perf_counter()
        try:
            with self._activity.operation():
                return await work
        finally:
            self.spent_s += time.perf_counter() - started


class _TimedContext:
    """An async context manager of the store whose entry and exit are timed store work."""

    def __init__(self, inner: Any, store: TimedStore) -> None:
        self._inner = inner
        self._store = store

    async def __aenter__(self) -> Any:
        return await self._store._timed(self._inner.__aenter__())

    async def __aexit__(self, *exc_info: object) -> Any:
        return await self._store._timed(self._inner.__aexit__(*exc_info))


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSpan:
    """One model call on the simulated clock."""

    role: Role
    arrived_s: float
    """When the request reached the server."""
    started_s: float
    """When the server began on it (later than `arrived_s` only on a busy shared server)."""
    ended_s: float
    usage: Usage

    @property
    def seconds(self) -> float:
        return self.ended_s - self.started_s


def role_of(request: ProviderRequest) -> Role:
    """The agent always offers its tools; the summarizer's requests (compressor, micro) never do."""
    return "main" if request.tools else "summary"


class TimedModelCalls:
    """Every model call takes its modeled seconds on the simulated clock, and is recorded."""

    def __init__(
        self,
        model: LatencyModel,
        *,
        sleep: SimSleep,
        activity: Activity,
        clock: Callable[[], float],
        server: FakeLLM,
    ) -> None:
        self.model = model
        self.spans: list[CallSpan] = []
        self.spent_s = 0.0
        """Client-side wall time of the main model's calls."""
        self._sleep = sleep
        self._activity = activity
        self._clock = clock
        self._server = server
        self._free_at = 0.0

    def install(self, *providers: Any) -> None:
        """Route each provider object's `complete` through this meter (each object once)."""
        seen: set[int] = set()
        for provider in providers:
            if id(provider) in seen:
                continue
            seen.add(id(provider))
            provider.complete = self._wrap(provider.complete)

    def _wrap(self, complete: Complete) -> Complete:
        async def timed(
            request: ProviderRequest, *, on_text: OnText | None = None
        ) -> ProviderReply:
            return await self._call(complete, request, on_text)

        return timed

    async def _call(
        self, complete: Complete, request: ProviderRequest, on_text: OnText | None
    ) -> ProviderReply:
        role, arrived = role_of(request), self._clock()
        started, busy = time.perf_counter(), self._server.busy_s
        try:
            with self._activity.operation():
                reply: ProviderReply = await complete(request, on_text=on_text)
        finally:
            if role == "main":
                wall = time.perf_counter() - started
                self.spent_s += wall - (self._server.busy_s - busy)
        begin = max(arrived, self._free_at) if self.model.shared_server else arrived
        ended = begin + self.model.seconds(role, reply.usage)
        if self.model.shared_server:
            self._free_at = ended
        self.spans.append(
            CallSpan(
                role=role, arrived_s=arrived, started_s=begin, ended_s=ended, usage=reply.usage
            )
        )
        await self._sleep.until(ended)
        return reply
