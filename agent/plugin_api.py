"""The public surface for plugins: everything a context engine plugin may import from Hermes.

A plugin (`plugins/context_engine/<name>/`) imports only this module, so the agent's insides can
change without breaking plugins. Build an engine by subclassing `ContextEngine`; reuse the
built-in rules (thresholds, boundaries, tool-pair sanitizing, summary markers, the summary
request and the deterministic local summary) and the archive's pieces (anchors, `read_anchor`,
`grep_archive`) rather than re-deriving them.
"""

from __future__ import annotations

from agent.archive.anchors import (
    Anchor,
    cite_absorbed,
    find_anchors,
    merge_anchors,
    parse_anchor,
    split_index,
    validate_anchors,
    with_index,
)
from agent.archive.grep import grep_archive
from agent.archive.recall import RECALL_MAX_CHARS, read_anchor
from agent.archive.render import clip_middle
from agent.compaction.assemble import assemble_compacted
from agent.compaction.boundary import Boundaries, TailPolicy, select_boundaries
from agent.compaction.local_summary import build_local_summary
from agent.compaction.markers import (
    find_newest_marker,
    is_marker,
    make_summary_marker,
    parse_summary_marker,
    with_compaction_note,
)
from agent.compaction.sanitize import sanitize_tool_pairs
from agent.compaction.summary_call import LocalFallback, request_summary
from agent.compaction.summary_prompt import build_summary_request
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
from agent.errors import CompactionRefused, ToolError
from agent.messages import (
    ChatMessage,
    content_text,
    is_real_user_message,
    system_message,
    user_message,
)
from agent.providers.base import Provider, ProviderRequest, ToolSpec, Usage
from agent.redaction import redact_text
from agent.tokens import (
    estimate_message_tokens_rough,
    estimate_messages_tokens_rough,
    estimate_tokens_rough,
)
from agent.tools.args import int_arg, store_of
from agent.tools.registry import Tool, ToolContext

__all__ = [
    "DEFAULT_CONTEXT_LENGTH",
    "RECALL_MAX_CHARS",
    "Anchor",
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
    "LocalFallback",
    "Provider",
    "ProviderRequest",
    "TailPolicy",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "Usage",
    "assemble_compacted",
    "build_local_summary",
    "build_summary_request",
    "cite_absorbed",
    "clip_middle",
    "compute_budgets",
    "content_text",
    "estimate_message_tokens_rough",
    "estimate_messages_tokens_rough",
    "estimate_tokens_rough",
    "find_anchors",
    "find_newest_marker",
    "grep_archive",
    "int_arg",
    "is_marker",
    "is_real_user_message",
    "make_summary_marker",
    "merge_anchors",
    "parse_anchor",
    "parse_summary_marker",
    "read_anchor",
    "redact_text",
    "register_context_engine",
    "request_summary",
    "resolve_model_threshold",
    "sanitize_tool_pairs",
    "select_boundaries",
    "split_index",
    "store_of",
    "system_message",
    "user_message",
    "validate_anchors",
    "with_compaction_note",
    "with_index",
]
