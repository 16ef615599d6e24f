"""Metering around the runtime's parts, when metrics are on: model calls, store operations and
end-of-turn work report to the one `MetricsRecorder`, and the agent's events become samples.

Each wrapper is transparent: a `MeteredProvider` is a `Provider`, a `MeteredWork` an
`EndOfTurnWork`; they time the call and hand the recorder a sample, never changing what
happens. Only `Runtime.start` installs them (with `metrics=`), so a runtime without metrics
runs the bare parts.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Literal

from agent.providers.base import OnText, Provider, ProviderReply, ProviderRequest
from gateway.metrics import MetricsRecorder, MicroPass, ModelCall, StoreOp, samples_from_event

if TYPE_CHECKING:
    from agent.agent import AIAgent, EndOfTurnWork, EventSink
    from state import OpObserver

__all__ = ["MeteredProvider", "MeteredWork", "event_sink", "store_observer"]


class MeteredProvider:
    """A provider whose every `complete` is one `ModelCall` sample (failed ones included)."""

    def __init__(
        self, inner: Provider, metrics: MetricsRecorder, *, role: Literal["main", "summary"]
    ) -> None:
        self._inner = inner
        self._metrics = metrics
        self._role: Literal["main", "summary"] = role
        self.name = inner.name

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        started, ok = time.monotonic(), False
        try:
            reply = await self._inner.complete(request, on_text=on_text)
            ok = True
            return reply
        finally:
            seconds = time.monotonic() - started
            self._metrics.record(ModelCall(role=self._role, seconds=seconds, ok=ok))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class MeteredWork:
    """End-of-turn work (micro-compaction) whose every pass is one `MicroPass` sample: it
    compacted when the agent's transcript was replaced, failed when it raised."""

    def __init__(self, inner: EndOfTurnWork, metrics: MetricsRecorder) -> None:
        self._inner = inner
        self._metrics = metrics

    def delay_s(self, agent: AIAgent) -> float | None:
        return self._inner.delay_s(agent)

    async def __call__(self, agent: AIAgent) -> None:
        before, started = agent.transcript, time.monotonic()
        try:
            await self._inner(agent)
        except asyncio.CancelledError:
            raise  # shutting down: not a pass that ended
        except Exception:
            self._record("failed", started)
            raise
        self._record("unchanged" if agent.transcript is before else "compacted", started)

    def _record(self, outcome: Literal["compacted", "unchanged", "failed"], started: float) -> None:
        self._metrics.record(MicroPass(outcome=outcome, seconds=time.monotonic() - started))

    def forget_session(self, session_id: str) -> None:
        self._inner.forget_session(session_id)


def event_sink(metrics: MetricsRecorder, then: EventSink | None) -> EventSink:
    """`AgentDeps.on_event` that records the events metrics count, then passes them on."""

    def on_event(name: str, payload: dict[str, Any]) -> None:
        sample = samples_from_event(name, payload)
        if sample is not None:
            metrics.record(sample)
        if then is not None:
            then(name, payload)

    return on_event


def store_observer(metrics: MetricsRecorder) -> OpObserver:
    """The store's `on_op`: one `StoreOp` sample per operation."""

    def observe(op: str, seconds: float, ok: bool) -> None:
        metrics.record(StoreOp(op=op, seconds=seconds, ok=ok))

    return observe
