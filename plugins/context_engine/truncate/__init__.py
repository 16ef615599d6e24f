"""Example context engine plugin "truncate": drops the middle without a model call.

It proves the plugin seam: found by name in `plugins/context_engine/<name>/`, built through
`create_engine(config, **deps)`, never active unless `context.engine: truncate` is set. It reuses
the built-in boundary, threshold and tool-pair rules, and exposes one tool to the agent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from agent.plugin_api import (
    DEFAULT_CONTEXT_LENGTH,
    ChatMessage,
    CompactionReason,
    CompressionConfig,
    CompressResult,
    ContextEngine,
    EngineStatus,
    HermesConfig,
    TailPolicy,
    Tool,
    ToolContext,
    ToolSpec,
    Usage,
    assemble_compacted,
    compute_budgets,
    estimate_message_tokens_rough,
    estimate_messages_tokens_rough,
    resolve_model_threshold,
    select_boundaries,
)

__all__ = ["TruncateEngine", "create_engine"]


def create_engine(config: HermesConfig, **deps: Any) -> ContextEngine:
    """Plugin entry point; `deps` (summarizer, summary_model) are not needed here."""
    return TruncateEngine(config.compression)


class TruncateEngine(ContextEngine):
    """Keeps head and tail, replaces the middle with a note saying how much was dropped."""

    name = "truncate"

    def __init__(self, config: CompressionConfig) -> None:
        self._config = config
        self._model = ""
        self._budgets = compute_budgets(
            DEFAULT_CONTEXT_LENGTH, config.threshold, config.target_ratio
        )
        self._last_prompt_tokens: int | None = None
        self._dropped = 0

    def update_model(self, model: str, context_length: int) -> None:
        cfg = self._config
        ratio = resolve_model_threshold(model, cfg.threshold, cfg.model_thresholds, context_length)
        self._model = model
        self._budgets = compute_budgets(context_length, ratio, cfg.target_ratio)

    def update_from_usage(self, usage: Usage, messages_sent: Sequence[ChatMessage]) -> None:
        self._last_prompt_tokens = usage.prompt_tokens

    def should_compress(self, messages: Sequence[ChatMessage]) -> bool:
        return estimate_messages_tokens_rough(messages) >= self._budgets.threshold_tokens

    async def compress(
        self,
        messages: list[ChatMessage],
        *,
        focus: str | None = None,
        reason: CompactionReason = "threshold",
    ) -> CompressResult:
        started = time.monotonic()
        policy = TailPolicy.from_config(
            self._config, tail_token_budget=self._budgets.tail_token_budget
        )
        tokens = [estimate_message_tokens_rough(m) for m in messages]
        bounds = select_boundaries(messages, tokens, policy)  # raises CompactionRefused
        dropped = bounds.tail_start - bounds.head_end
        note = f"{dropped} earlier messages were dropped to save context space (no summary)."
        out = assemble_compacted(
            messages[: bounds.head_end], note, bounds.summary_role, messages[bounds.tail_start :]
        )
        self._dropped += dropped
        self._last_prompt_tokens = None
        return CompressResult(
            messages=out,
            summary_tokens=estimate_message_tokens_rough(out[bounds.head_end]),
            tokens_before=sum(tokens),
            tokens_after=estimate_messages_tokens_rough(out),
            messages_before=len(messages),
            messages_after=len(out),
            outcome="truncated",
            reason=reason,
            duration_ms=(time.monotonic() - started) * 1000,
        )

    def tools(self) -> list[Tool]:
        spec = ToolSpec(
            name="context_status",
            description="Report how full the context window is and how much was dropped.",
            parameters={"type": "object", "properties": {}},
        )
        return [Tool(spec=spec, handler=self._status_tool)]

    async def _status_tool(self, args: dict[str, Any], ctx: ToolContext) -> str:
        status = self.status()
        return json.dumps(
            {
                "engine": status.engine,
                "model": status.model,
                "threshold_tokens": status.threshold_tokens,
                "last_prompt_tokens": status.last_prompt_tokens,
                **status.details,
            }
        )

    def status(self) -> EngineStatus:
        return EngineStatus(
            engine=self.name,
            model=self._model,
            context_length=self._budgets.context_length,
            threshold_tokens=self._budgets.threshold_tokens,
            last_prompt_tokens=self._last_prompt_tokens,
            details={"messages_dropped": self._dropped},
        )

    def reset_session(self) -> None:
        self._last_prompt_tokens = None
        self._dropped = 0

    @property
    def threshold_tokens(self) -> int:
        return self._budgets.threshold_tokens

    @property
    def context_length(self) -> int:
        return self._budgets.context_length
