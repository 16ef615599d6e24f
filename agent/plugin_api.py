"""The public surface for plugins: everything a context engine plugin may import from Hermes.

A plugin (`plugins/context_engine/<name>/`) imports only this module, so the agent's insides can
change without breaking plugins. Build an engine by subclassing `ContextEngine`; reuse the
built-in rules (thresholds, boundaries, tool-pair sanitizing, summary markers) rather than
re-deriving them.
"""

from __future__ import annotations

from agent.compaction.assemble import assemble_compacted
from agent.compaction.boundary import Boundaries, TailPolicy, select_boundaries
from agent.compaction.markers import (
    find_newest_marker,
    is_marker,
    make_summary_marker,
    parse_summary_marker,
)
from agent.compaction.sanitize import sanitize_tool_pairs
from agent.compaction.threshold import Budgets, compute_budgets, resolve_model_threshold
from agent.config import CompressionConfig, HermesConfig
from agent.context_engine import (
    DEFAULT_CONTEXT_LENGTH,
    CompactionReason,
    CompressResult,
    ContextEngine,
    EngineStatus,
    register_context_engine,
)
from agent.errors import CompactionRefused
from agent.messages import ChatMessage, content_text, is_real_user_message
from agent.providers.base import Provider, ProviderRequest, ToolSpec, Usage
from agent.tokens import estimate_message_tokens_rough, estimate_messages_tokens_rough
from agent.tools.registry import Tool, ToolContext

__all__ = [
    "DEFAULT_CONTEXT_LENGTH",
    "Boundaries",
    "Budgets",
    "ChatMessage",
    "CompactionReason",
    "CompactionRefused",
    "CompressResult",
    "CompressionConfig",
    "ContextEngine",
    "EngineStatus",
    "HermesConfig",
    "Provider",
    "ProviderRequest",
    "TailPolicy",
    "Tool",
    "ToolContext",
    "ToolSpec",
    "Usage",
    "assemble_compacted",
    "compute_budgets",
    "content_text",
    "estimate_message_tokens_rough",
    "estimate_messages_tokens_rough",
    "find_newest_marker",
    "is_marker",
    "is_real_user_message",
    "make_summary_marker",
    "parse_summary_marker",
    "register_context_engine",
    "resolve_model_threshold",
    "sanitize_tool_pairs",
    "select_boundaries",
]
