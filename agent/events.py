"""What an agent tells the runtime while it works: a closed union of frozen values.

`AIAgent` hands each event to `AgentDeps.on_event` (tool calls through `agent.tools.progress`,
which finds the same sink in `ToolContext.services["on_event"]`); the consumers (metrics in
`gateway.metrics.samples_from_event`, the chat's compaction lines in `gateway.platforms.terminal`
and `cli.chat_cmd`, the simulator's compaction intervals in `sim.replay`) dispatch with
`match … case … assert_never`, so a new event is a type error wherever it is not handled.

Each event keeps the string name it had when events were a name plus a dict (`event.name`,
e.g. `compaction:start`) and that dict (`event.payload()`), for logs and anything that still
speaks strings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal, TypeAlias

__all__ = [
    "AgentEvent",
    "CompactionReason",
    "CompactionBegan",
    "CompactionCommitted",
    "EngineSwitched",
    "EventSink",
    "ModelSwitched",
    "NativeCompaction",
    "SessionReloaded",
    "ToolFinished",
    "ToolStarted",
]

CompactionReason: TypeAlias = Literal["threshold", "manual", "context_too_long", "hygiene"]
"""Why a compaction runs. Automatic reasons ("threshold", "context_too_long", "hygiene") may
degrade the plan to fit; "manual" (`/compress`, `hermes sessions compress`) keeps the tail.
Re-exported by `agent.context_engine`; defined here so that this module imports nothing of ours
(tools report through events too, and the engine imports the tools)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionReloaded:
    """Another worker moved the session: the agent started over from the stored active set."""

    name: ClassVar[str] = "session:reloaded"
    session_id: str
    version: int

    def payload(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSwitched:
    """The next model call goes to another model; its prompt cache starts cold."""

    name: ClassVar[str] = "model:switch"
    model: str
    context_length: int

    def payload(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSwitched:
    """The session uses another context engine from now on."""

    name: ClassVar[str] = "engine:switch"
    session_id: str
    engine: str

    def payload(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionBegan:
    """A compaction is about to be committed: in the turn (batch) or adopted at its boundary."""

    name: ClassVar[str] = "compaction:start"
    session_id: str
    reason: CompactionReason

    def payload(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionCommitted:
    """A compacted transcript is the session's active set now, with what it saved."""

    name: ClassVar[str] = "session:compress"
    session_id: str
    """The session that holds the compacted set (a new one when compaction rotates)."""
    old_session_id: str = ""
    """The session rotated away from; empty when compacted in place."""
    reason: CompactionReason
    kind: Literal["batch", "micro"]
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    seconds: float

    @property
    def in_place(self) -> bool:
        return not self.old_session_id

    def payload(self) -> dict[str, Any]:
        return {**asdict(self), "in_place": self.in_place}


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeCompaction:
    """The engine compacted elsewhere (e.g. the Codex app-server's own thread): the local
    transcript is untouched, only the count moved."""

    name: ClassVar[str] = "session:compress"
    session_id: str
    reason: CompactionReason

    def payload(self) -> dict[str, Any]:
        return {**asdict(self), "in_place": True, "old_session_id": "", "native": True}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted:
    """A tool call begins (`agent.tools.progress`): its name and its arguments on one line,
    redacted (a command as typed)."""

    name: ClassVar[str] = "tool:start"
    session_id: str
    tool: str
    arguments: str

    def payload(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "name": self.tool, "arguments": self.arguments}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished:
    """A tool call ended: its result as the model reads it, redacted and cut to a preview."""

    name: ClassVar[str] = "tool:end"
    session_id: str
    tool: str
    result: str

    def payload(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "name": self.tool, "result": self.result}


AgentEvent: TypeAlias = (
    SessionReloaded
    | ModelSwitched
    | EngineSwitched
    | CompactionBegan
    | CompactionCommitted
    | NativeCompaction
    | ToolStarted
    | ToolFinished
)

EventSink: TypeAlias = Callable[[AgentEvent], None]
"""`AgentDeps.on_event`: called synchronously in the agent's task, so it must not block."""
