"""Meters around the runtime's store and model calls: wall-time stopwatches and simulated time.

`TimedStore` is a transparent proxy: every attribute passes through, and the store's role objects
(`store.transcript`, `store.locks`, ...) are proxied the same way; coroutine methods are timed
and marked in flight for the pump, and so are the entry and exit of the async context managers
their methods return (the session lock: a lease written to the database). `TimedModelCalls` is installed on the provider objects
themselves (the agent's provider, and the summarizer that the context engine and micro-compaction
hold), so every model call of the runtime passes through it however the runtime wires its
summarizer: it waits for the server's capacity (`sim.capacity`: one slot shared by the agent and
the summarizer, or unlimited), marks the HTTP exchange in flight, then sleeps the call's modeled
seconds on the simulated clock (`sim.latency`), and records the call as a `CallSpan`: who made
it (`TaskTags`: the asyncio task, and for a summary the summarizer job it belongs to). Its wall time excludes
what the sim server spent answering, which leaves the client side (SDK request building, HTTP,
stream parsing) — the part of a model call that is the runtime's cost.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from agent.providers.base import OnText, ProviderReply, ProviderRequest, Usage
from sim.capacity import Capacity, OneSlot, Unlimited
from sim.latency import LatencyModel, Role
from sim.llm_server import FakeLLM
from sim.simclock import Activity, SimSleep

__all__ = ["CallSpan", "TaskTags", "TimedModelCalls", "TimedStore", "role_of"]

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
    task: int = 0
    """The asyncio task that made the call (`TaskTags` numbers them in order of first call)."""
    job: int = -1
    """The summarizer job a summary call belongs to (`TaskTags.job`); -1 for the agent's calls."""
    origin: str = ""
    """What kind of task made it: its name up to the first colon (`turn`, `end-of-turn`, ...)."""
    cancelled: bool = False
    """The caller gave up while it was served: `ended_s` is when it did."""

    @property
    def seconds(self) -> float:
        return self.ended_s - self.started_s


def role_of(request: ProviderRequest) -> Role:
    """The agent always offers its tools; the summarizer's requests (compressor, micro) never do."""
    return "main" if request.tools else "summary"


class TaskTags:
    """Who made a call: the asyncio task, and for a summary the summarizer job it is part of.

    A job is the summarizer work of one compaction or one micro pass: the summary calls one
    task makes until that task commits a compaction (`committed`, from the agent's events). A
    background task (a prepared compaction, a micro pass) is one job; a turn's task makes one
    job per compaction it runs inside the turn (hygiene, threshold, too long)."""

    def __init__(self) -> None:
        self._serials: weakref.WeakKeyDictionary[asyncio.Task[Any], int] = (
            weakref.WeakKeyDictionary()
        )
        self._commits: dict[int, int] = {}
        self._jobs: dict[tuple[int, int], int] = {}
        self.job_origins: dict[int, str] = {}

    def task(self) -> tuple[int, str]:
        """The current task's number and origin (0 and "" outside any task)."""
        current = asyncio.current_task()
        if current is None:
            return 0, ""
        serial = self._serials.get(current)
        if serial is None:
            serial = self._serials[current] = len(self._commits) + 1
            self._commits[serial] = 0
        return serial, _origin(current.get_name())

    def job(self) -> int:
        """The job of a summary call made now."""
        serial, origin = self.task()
        key = (serial, self._commits.get(serial, 0))
        job = self._jobs.get(key)
        if job is None:
            job = self._jobs[key] = len(self._jobs)
            self.job_origins[job] = origin
        return job

    def committed(self) -> None:
        """The current task committed a compaction: its next summary call starts a new job."""
        serial, _ = self.task()
        self._commits[serial] = self._commits.get(serial, 0) + 1


def _origin(task_name: str) -> str:
    head = task_name.split(":", 1)[0]
    return "task" if head.startswith("Task-") else head


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
        tags: TaskTags | None = None,
    ) -> None:
        self.model = model
        self.tags = tags or TaskTags()
        self.capacity: Capacity = OneSlot(activity) if model.shared_server else Unlimited()
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
        task, origin = self.tags.task()
        job = self.tags.job() if role == "summary" else -1
        async with self.capacity.held():
            begin = self._clock()
            started, busy = time.perf_counter(), self._server.busy_s
            try:
                with self._activity.operation():
                    reply: ProviderReply = await complete(request, on_text=on_text)
            finally:
                if role == "main":
                    wall = time.perf_counter() - started
                    self.spent_s += wall - (self._server.busy_s - busy)
            span = CallSpan(
                role=role,
                arrived_s=arrived,
                started_s=begin,
                ended_s=begin + self.model.seconds(role, reply.usage),
                usage=reply.usage,
                task=task,
                job=job,
                origin=origin,
            )
            index = len(self.spans)
            self.spans.append(span)
            try:
                await self._sleep.until(span.ended_s)
            except asyncio.CancelledError:
                self.spans[index] = replace(span, ended_s=self._clock(), cancelled=True)
                raise
        return reply
