"""Metering around the runtime's parts, when metrics are on: model calls, store operations and
end-of-turn passes (and what became of their proposals) report to the one `MetricsRecorder`,
and the agent's events become samples.

Each wrapper is transparent: a `MeteredProvider` is a `Provider`, a `MeteredWork` an
`EndOfTurnWork`; they time the call and hand the recorder a sample, never changing what
happens. Only `Runtime.start` installs them (with `metrics=`), so a runtime without metrics
runs the bare parts.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from agent.providers.base import OnText, Provider, ProviderReply, ProviderRequest
from gateway.metrics import (
    BackgroundKind,
    BackgroundPass,
    MetricsRecorder,
    ModelCall,
    ProposalSettled,
    StoreOp,
    samples_from_event,
)

if TYPE_CHECKING:
    from agent.background import EndOfTurnWork, SessionView
    from agent.events import AgentEvent, EventSink
    from agent.messages import ChatMessage
    from agent.proposals import Proposal
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
    """End-of-turn work whose every pass is a `BackgroundPass` sample, and whose proposal
    reports, once the agent adopts or drops it, a `ProposalSettled` sample."""

    def __init__(self, inner: EndOfTurnWork, metrics: MetricsRecorder, kind: BackgroundKind):
        self._inner = inner
        self._metrics = metrics
        self._kind: BackgroundKind = kind

    def delay_s(self, session: SessionView) -> float | None:
        return self._inner.delay_s(session)

    async def __call__(self, session: SessionView) -> Proposal | None:
        started = time.monotonic()
        try:
            proposal = await self._inner(session)
        except asyncio.CancelledError:
            raise  # shutting down, or a turn came first: not a pass that ended
        except Exception:
            self._record("failed", started)
            raise
        self._record("nothing" if proposal is None else "proposed", started)
        if proposal is None:
            return None
        return self._settling(proposal, session.session_id)

    def forget_session(self, session_id: str) -> None:
        self._inner.forget_session(session_id)

    def _record(self, outcome: Literal["proposed", "nothing", "failed"], started: float) -> None:
        seconds = time.monotonic() - started
        self._metrics.record(BackgroundPass(kind=self._kind, outcome=outcome, seconds=seconds))

    def _settling(self, proposal: Proposal, session_id: str) -> Proposal:
        """The same proposal, its adoption or drop reported before its own callbacks run."""
        kind, metrics = self._kind, self._metrics
        adopted_then, dropped_then = proposal.on_adopted, proposal.on_dropped

        async def adopted(messages: list[ChatMessage]) -> None:
            metrics.record(ProposalSettled(session_id=session_id, kind=kind, adopted=True))
            if adopted_then is not None:
                await adopted_then(messages)

        async def dropped(why: str) -> None:
            metrics.record(ProposalSettled(session_id=session_id, kind=kind, adopted=False))
            if dropped_then is not None:
                await dropped_then(why)

        return replace(proposal, on_adopted=adopted, on_dropped=dropped)


def event_sink(metrics: MetricsRecorder, then: EventSink | None) -> EventSink:
    """`AgentDeps.on_event` that records the events metrics count, then passes them on."""

    def on_event(event: AgentEvent) -> None:
        sample = samples_from_event(event)
        if sample is not None:
            metrics.record(sample)
        if then is not None:
            then(event)

    return on_event


def store_observer(metrics: MetricsRecorder) -> OpObserver:
    """The store's `on_op`: one `StoreOp` sample per operation."""

    def observe(op: str, seconds: float, ok: bool) -> None:
        metrics.record(StoreOp(op=op, seconds=seconds, ok=ok))

    return observe
