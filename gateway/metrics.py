"""Operational metrics: one recording interface, fed from where things happen.

Everything that counts hands a `Sample` to `MetricsRecorder.record`: the runner a finished turn
and its queue depths, the runtime each model call, store operation and background pass (a
micro-compaction pass, a batch compaction prepared ahead) with what became of its proposal, and
the agent's compaction events (`agent.events`) through `samples_from_event`.
`gateway.prometheus.PrometheusMetrics` turns samples into `hermes_*` series; `NO_METRICS` drops
them (metrics are off by default). Importing this module loads no metrics library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, assert_never

from agent.events import (
    AgentEvent,
    CompactionBegan,
    CompactionCommitted,
    EngineSwitched,
    ModelSwitched,
    NativeCompaction,
    SessionReloaded,
    ToolFinished,
    ToolStarted,
)
from agent.providers.base import Usage

__all__ = [
    "NO_METRICS",
    "BackgroundKind",
    "CompactionEnded",
    "CompactionStarted",
    "JobOutcome",
    "JobRun",
    "MetricsRecorder",
    "BackgroundPass",
    "ModelCall",
    "ProposalSettled",
    "QueueDepth",
    "Sample",
    "StoreOp",
    "TurnDone",
    "TurnKind",
    "samples_from_event",
]

TurnKind: TypeAlias = Literal["reply", "command", "error", "failed", "interrupted"]
"""reply: the model answered; command: a chat command; error: the provider failed or the turn
hit its step limit (the user was told); failed: an unexpected error ended the turn;
interrupted: the user stopped it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDone:
    """One inbound message handled, from the moment its lane took it to the reply."""

    platform: str
    kind: TurnKind
    seconds: float
    session_id: str = ""
    """Not a label: it settles compactions this turn started that never finished."""
    usage: Usage | None = None
    model: str | None = None
    """Prices the usage (`pricing`); not a label."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    role: Literal["main", "summary"]
    seconds: float
    ok: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreOp:
    op: str
    """The store operation's fixed name (`append`, `load_active`, `archive_and_compact`, ...)."""
    seconds: float
    ok: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionStarted:
    session_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionEnded:
    session_id: str
    kind: Literal["batch", "native"]
    """What the event says; a proposal adopted just before may name the kind better."""
    reason: str


BackgroundKind: TypeAlias = Literal["micro", "batch"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BackgroundPass:
    """One pass of end-of-turn work, from its snapshot to what it hands back."""

    kind: BackgroundKind
    outcome: Literal["proposed", "nothing", "failed"]
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalSettled:
    """What became of a pass's proposal: adopted at a turn boundary, or dropped."""

    session_id: str
    """Not a label: it tells the adoption's `CompactionCommitted` which kind it was."""
    kind: BackgroundKind
    adopted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDepth:
    platform: str
    depth: int
    """Messages waiting for their turn (not counting the ones running)."""


JobOutcome: TypeAlias = Literal["ok", "silent", "stored", "failed", "skipped", "missed", "redone"]
"""ok: delivered to the chat; silent: the reply was the silence marker (nothing sent); stored:
kept in the session (no chat to send to); failed: the run failed (the owner was told);
skipped: quiet hours, an active chat (heartbeats) or a revoked owner; missed: a run the
catch-up policy let go; redone: delivered by a worker that died before finishing it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRun:
    """One claimed run of a scheduled job, and what became of it."""

    kind: str
    """job | reminder | heartbeat"""
    outcome: JobOutcome


Sample: TypeAlias = (
    TurnDone
    | ModelCall
    | StoreOp
    | CompactionStarted
    | CompactionEnded
    | BackgroundPass
    | ProposalSettled
    | QueueDepth
    | JobRun
)


class MetricsRecorder(Protocol):
    """Where samples go. Implementations never raise and never block."""

    def record(self, sample: Sample) -> None: ...


class _NoMetrics:
    def record(self, sample: Sample) -> None:
        return None


NO_METRICS: MetricsRecorder = _NoMetrics()


def samples_from_event(event: AgentEvent) -> Sample | None:
    """The sample of an agent event (`AgentDeps.on_event`), or None for events not counted."""
    match event:
        case CompactionBegan(session_id=session_id, reason=reason):
            return CompactionStarted(session_id=session_id, reason=reason)
        case CompactionCommitted(session_id=session_id, old_session_id=old, reason=reason):
            # The session that began the compaction (the old one when it rotated); a micro
            # adoption is told apart by the `ProposalSettled` recorded just before.
            return CompactionEnded(session_id=old or session_id, kind="batch", reason=reason)
        case NativeCompaction(session_id=session_id, reason=reason):
            return CompactionEnded(session_id=session_id, kind="native", reason=reason)
        case (
            SessionReloaded() | ModelSwitched() | EngineSwitched() | ToolStarted() | ToolFinished()
        ):
            return None
        case unreachable:
            assert_never(unreachable)
