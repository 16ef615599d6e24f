"""The context engine seam: the `ContextEngine` ABC, its value types, and the engine registry.

Global state department: `_REGISTRY` below is the one piece of module-level mutable state here.
It is filled only by explicit `register_context_engine()` calls (from `run_agent.py`, a plugin
set-up, or a test); importing this module registers nothing. `agent.engine_resolution` turns
`context.engine` into an engine (plugin folder, then this registry, then the built-in).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, TypeAlias

from agent.events import CompactionReason
from agent.memory.facts import UserFact
from agent.messages import ChatMessage
from agent.providers.base import Usage
from agent.tokens import estimate_messages_tokens_rough
from agent.tools.registry import Tool

if TYPE_CHECKING:
    pass

__all__ = [
    "BUILTIN_ENGINE",
    "DEFAULT_CONTEXT_LENGTH",
    "CompactionReason",
    "CompressResult",
    "ContextEngine",
    "EngineFactory",
    "EngineStatus",
    "SummaryUpgrade",
    "register_context_engine",
    "registered_context_engines",
]

BUILTIN_ENGINE = "compressor"
DEFAULT_CONTEXT_LENGTH = 200_000
"""Used until `update_model` says otherwise (config `model.context_length` unset)."""

EngineFactory: TypeAlias = Callable[..., "ContextEngine"]
"""`factory(config, *, summarizer=..., summary_model=...) -> ContextEngine`."""

SummaryUpgrade: TypeAlias = Callable[[], Awaitable[str]]
"""Makes the model's summary a stopgap compaction stood in for (one model call); raises
`CompactionRefused` when the model gives nothing usable (the stopgap then stays)."""

_REGISTRY: dict[str, EngineFactory] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressResult:
    """What one compaction produced; the agent loop hands `messages` to the store."""

    messages: list[ChatMessage]
    """The new active transcript. Carried messages keep `_id`/`_persisted`; changed or new
    ones (the summary marker, a system message that gained the note, pruned tool results)
    have neither."""
    summary_tokens: int
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    outcome: str
    """"compressed" (model summary), "local_summary" (deterministic fallback), or a plugin's
    own word (e.g. "truncated")."""
    reason: CompactionReason
    duration_ms: float
    detail: str = ""
    """How much the plan had to degrade (`agent.compaction.plan.DEGRADE_DETAILS`)."""
    summary: str = ""
    """The summary text the new marker carries (empty when nothing was summarized)."""
    user_facts: tuple[UserFact, ...] = ()
    """Facts about the user the summary call listed, anchored to the absorbed rows; the agent
    keeps them in the person's memory before the compaction commits."""
    upgrade: SummaryUpgrade | None = None
    """A stopgap's (`ContextEngine.prepare_stopgap`) way to the model's summary of the same
    middle, which replaces the stopgap's summary when it arrives (`agent.stopgap`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineStatus:
    """What an engine reports for `/status`, the terminal's status line and micro-compaction."""

    engine: str
    model: str
    context_length: int
    threshold_tokens: int
    last_prompt_tokens: int | None = None
    """Real prompt tokens of the last model call; None until one is reported (or after a
    compaction made it stale)."""
    compactions: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    token_ratio: float = 1.0
    """Calibrated real/rough token ratio for this model (1.0 when the engine keeps none)."""
    tail_token_budget: int | None = None
    """The protected tail's token budget; None for engines without one, which also means
    micro-compaction has nothing to work with."""
    threshold_ratio: float | None = None
    max_summary_tokens: int | None = None
    local_summaries: int = 0
    last_outcome: str = ""
    last_refusal: str = ""
    has_previous_summary: bool = False
    details: Mapping[str, int | str | None] = field(default_factory=dict)
    """Engine-specific counts and labels (e.g. the Codex thread id), shown as they are."""


class ContextEngine(ABC):
    """Decides when and how the active transcript shrinks. One instance per session."""

    name: str
    prepares_ahead: ClassVar[bool] = False
    """`prepare` changes nothing until `adopt`, so a compaction may be prepared in the
    background ahead of the threshold (`agent.prepared_compaction`) and dropped if never needed."""

    @abstractmethod
    def update_model(self, model: str, context_length: int) -> None:
        """The session now talks to `model` with this window; thresholds are re-resolved."""

    @abstractmethod
    def update_from_usage(self, usage: Usage, messages_sent: Sequence[ChatMessage]) -> None:
        """A provider reply reported `usage` for a request that carried `messages_sent`."""

    @abstractmethod
    def should_compress(self, messages: Sequence[ChatMessage]) -> bool:
        """Cheap, no I/O: should the loop compact before the next model call?"""

    @abstractmethod
    async def compress(
        self,
        messages: list[ChatMessage],
        *,
        focus: str | None = None,
        reason: CompactionReason = "threshold",
    ) -> CompressResult:
        """Compact `messages` (never mutated). Raises CompactionRefused, transcript untouched."""

    async def prepare(
        self,
        messages: list[ChatMessage],
        *,
        focus: str | None = None,
        reason: CompactionReason = "threshold",
    ) -> CompressResult:
        """Compute a compaction ahead of time, off a snapshot, without counting it as done; the
        agent calls `adopt` if it uses the result. An engine that cannot separate the two
        simply compacts here (and `adopt` does nothing)."""
        return await self.compress(messages, focus=focus, reason=reason)

    async def prepare_stopgap(
        self, messages: list[ChatMessage], *, reason: CompactionReason = "context_too_long"
    ) -> CompressResult | None:
        """A compaction without a model call, for a request that would not fit while no
        prepared compaction is ready: nobody waits for a summary. Its `upgrade`, if any, makes
        the model's summary later. None: this engine has none (the agent uses `prepare`)."""
        return None

    def adopt(self, result: CompressResult) -> None:
        """A prepared result became the session's transcript."""
        return None

    def learn_from_overflow(
        self,
        *,
        window_tokens: int | None,
        prompt_tokens: int | None,
        messages_sent: Sequence[ChatMessage],
    ) -> int | None:
        """The provider refused `messages_sent` as too long and named these sizes (any may be
        None). Returns the window now in force if the overflow changed it, else None."""
        return None

    def current_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """The engine's best count of the prompt `messages` make; the rough estimate by default."""
        return estimate_messages_tokens_rough(messages)

    def tools(self) -> list[Tool]:
        """Tools this engine offers the agent (e.g. a search over what it folded away)."""
        return []

    @abstractmethod
    def status(self) -> EngineStatus:
        """Counts for `/status`, the status line and telemetry."""

    @abstractmethod
    def reset_session(self) -> None:
        """Forget per-session state (previous summary, usage, backoff)."""

    @property
    @abstractmethod
    def threshold_tokens(self) -> int: ...

    @property
    @abstractmethod
    def context_length(self) -> int: ...


def register_context_engine(name: str, factory: EngineFactory) -> None:
    """Make `factory` available as `context.engine: <name>`; "compressor" is reserved."""
    if name == BUILTIN_ENGINE:
        raise ValueError(f"{BUILTIN_ENGINE!r} is the built-in engine and cannot be replaced")
    if not name.isidentifier():
        raise ValueError(f"context engine name {name!r} must be a Python identifier")
    _REGISTRY[name] = factory


def registered_context_engines() -> dict[str, EngineFactory]:
    """A copy of the registry: the names plugins registered and their factories."""
    return dict(_REGISTRY)
