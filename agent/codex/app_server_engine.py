"""The context engine for the Codex app-server runtime: compaction happens in the codex thread.

The codex agent owns the real context, so Hermes never rewrites its local transcript here: a
compaction asks the app-server to compact the thread, records the boundary through the injected
`on_boundary` callback, and returns the messages unchanged. `compression.codex_app_server_auto`:
`native` (default) lets codex decide and records what it reports, `hermes` lets Hermes' threshold
start a server compaction, `off` never starts one automatically. `/compress` always does.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol

import structlog

from agent.codex.app_server import CompactionListener, ThreadCompaction
from agent.compaction.threshold import resolve_model_threshold
from agent.config import CompressionConfig
from agent.context_engine import (
    DEFAULT_CONTEXT_LENGTH,
    CompactionReason,
    CompressResult,
    ContextEngine,
    EngineStatus,
)
from agent.errors import CompactionRefused, ProviderError, StoreError
from agent.messages import ChatMessage
from agent.providers.base import Usage
from agent.tokens import estimate_messages_tokens_rough

__all__ = [
    "BOUNDARY_KIND",
    "OUTCOME",
    "AutoMode",
    "CodexAppServerEngine",
    "ThreadCompactor",
    "boundary_record",
    "should_initiate",
]

AutoMode = Literal["native", "hermes", "off"]
BOUNDARY_KIND = "codex_app_server_compaction"
OUTCOME = "app_server_compacted"
"""`CompressResult.outcome` of a thread compaction (the transcript is returned unchanged)."""
MANUAL = "manual"

OnBoundary = Callable[[dict[str, Any]], Awaitable[None]]
"""Records a compaction boundary in the session store (state.db)."""

log = structlog.get_logger(__name__)


class ThreadCompactor(Protocol):
    """What the engine needs of the app-server provider."""

    @property
    def thread_id(self) -> str | None: ...

    async def compact_thread(self) -> ThreadCompaction: ...

    def add_compaction_listener(self, listener: CompactionListener) -> None: ...


def should_initiate(*, mode: AutoMode, reason: CompactionReason, enabled: bool = True) -> bool:
    """May Hermes start a thread compaction for `reason`? Manual always; automatic only in
    `hermes` mode with compression enabled."""
    if reason == MANUAL:
        return True
    return enabled and mode == "hermes"


def boundary_record(
    event: ThreadCompaction,
    *,
    initiator: str,
    reason: str,
    messages: Sequence[ChatMessage],
    prompt_tokens_before: int,
    at: float,
) -> dict[str, Any]:
    """The store row for one compaction: where the boundary falls in the visible transcript."""
    last_id = next((m.get("_id") for m in reversed(messages) if m.get("_id") is not None), None)
    return {
        "kind": BOUNDARY_KIND,
        "initiator": initiator,
        "reason": reason,
        "thread_id": event.thread_id,
        "turn_id": event.turn_id,
        "item_id": event.item_id,
        "message_count": len(messages),
        "last_message_id": last_id,
        "prompt_tokens_before": prompt_tokens_before,
        "prompt_tokens_after": event.usage.prompt_tokens if event.usage is not None else None,
        "duration_ms": round(event.duration_ms, 1),
        "at": at,
    }


class CodexAppServerEngine(ContextEngine):
    """One per session. Never changes the transcript; the store records each boundary."""

    name = "codex_app_server"

    def __init__(
        self,
        config: CompressionConfig,
        *,
        compactor: ThreadCompactor,
        on_boundary: OnBoundary,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._mode: AutoMode = config.codex_app_server_auto
        self._compactor = compactor
        self._on_boundary = on_boundary
        self._clock = clock
        self._model = ""
        self._context_length = DEFAULT_CONTEXT_LENGTH
        self._threshold_tokens = self._resolve_threshold("", DEFAULT_CONTEXT_LENGTH)
        self.reset_session()
        compactor.add_compaction_listener(self._on_server_compaction)

    # -- the ContextEngine interface -----------------------------------------------------------

    def update_model(self, model: str, context_length: int) -> None:
        self._model = model
        self._context_length = context_length
        self._threshold_tokens = self._resolve_threshold(model, context_length)

    def update_from_usage(self, usage: Usage, messages_sent: Sequence[ChatMessage]) -> None:
        if usage.prompt_tokens > 0:
            self._last_prompt_tokens = usage.prompt_tokens

    def should_compress(self, messages: Sequence[ChatMessage]) -> bool:
        if not should_initiate(mode=self._mode, reason="threshold", enabled=self._config.enabled):
            return False
        return self._last_prompt_tokens >= self._threshold_tokens

    async def compress(
        self,
        messages: list[ChatMessage],
        *,
        focus: str | None = None,
        reason: CompactionReason = "threshold",
    ) -> CompressResult:
        """Compact the codex thread; `messages` come back unchanged (same dicts, same order)."""
        if not should_initiate(mode=self._mode, reason=reason, enabled=self._config.enabled):
            raise CompactionRefused(
                f"compression.codex_app_server_auto is {self._mode!r}: Hermes does not start "
                "automatic compaction of the codex thread (use /compress)"
            )
        before = self._last_prompt_tokens or estimate_messages_tokens_rough(messages)
        started = time.monotonic()
        try:
            event = await self._compactor.compact_thread()
        except ProviderError as exc:
            self._failures += 1
            raise CompactionRefused(f"codex thread compaction failed: {exc.detail or exc}") from exc
        initiator = MANUAL if reason == MANUAL else "hermes"
        await self._record(
            event, initiator=initiator, reason=reason, messages=messages, before=before
        )
        after = event.usage.prompt_tokens if event.usage is not None else before
        self._last_prompt_tokens = 0  # unknown until the next turn reports usage
        return CompressResult(
            messages=list(messages),
            summary_tokens=0,
            tokens_before=before,
            tokens_after=after,
            messages_before=len(messages),
            messages_after=len(messages),
            outcome=OUTCOME,
            reason=reason,
            duration_ms=(time.monotonic() - started) * 1000,
            detail="transcript_unchanged",
        )

    def status(self) -> EngineStatus:
        return EngineStatus(
            engine=self.name,
            model=self._model,
            context_length=self._context_length,
            threshold_tokens=self._threshold_tokens,
            last_prompt_tokens=self._last_prompt_tokens,
            compactions=sum(self._counts.values()),
            failures=self._failures,
            details={
                "auto_mode": self._mode,
                "thread_id": self._compactor.thread_id,
                **{f"compactions_{initiator}": n for initiator, n in self._counts.items()},
            },
        )

    @property
    def compaction_counts(self) -> dict[str, int]:
        """Thread compactions by who started them: manual, hermes, native."""
        return dict(self._counts)

    def reset_session(self) -> None:
        self._last_prompt_tokens = 0
        self._counts = {"manual": 0, "hermes": 0, "native": 0}
        self._failures = 0

    @property
    def threshold_tokens(self) -> int:
        return self._threshold_tokens

    @property
    def context_length(self) -> int:
        return self._context_length

    # -- internals ------------------------------------------------------------------------------

    async def _on_server_compaction(
        self, event: ThreadCompaction, messages: Sequence[ChatMessage]
    ) -> None:
        """Codex compacted on its own during a turn: count it and record the boundary."""
        before = self._last_prompt_tokens
        await self._record(
            event, initiator="native", reason="native", messages=messages, before=before
        )

    async def _record(
        self,
        event: ThreadCompaction,
        *,
        initiator: str,
        reason: CompactionReason | Literal["native"],
        messages: Sequence[ChatMessage],
        before: int,
    ) -> None:
        self._counts[initiator] += 1
        record = boundary_record(
            event,
            initiator=initiator,
            reason=reason,
            messages=messages,
            prompt_tokens_before=before,
            at=self._clock(),
        )
        log.info(
            "codex_compaction_recorded",
            initiator=initiator,
            reason=reason,
            thread_id=event.thread_id,
            message_count=len(messages),
        )
        try:
            await self._on_boundary(record)
        except StoreError as exc:  # the thread did compact; only the bookkeeping is missing
            log.warning("codex_compaction_boundary_not_recorded", error=str(exc))

    def _resolve_threshold(self, model: str, context_length: int) -> int:
        ratio = resolve_model_threshold(
            model, self._config.threshold, self._config.model_thresholds, context_length
        )
        return int(context_length * ratio)
