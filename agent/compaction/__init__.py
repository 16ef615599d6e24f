"""Pure phases of batch compaction: thresholds, boundaries, pruning, summary input, assembly."""

from __future__ import annotations

from agent.compaction.assemble import assemble_compacted
from agent.compaction.boundary import Boundaries, TailPolicy, select_boundaries
from agent.compaction.guard import GuardState
from agent.compaction.local_summary import build_local_summary
from agent.compaction.markers import (
    COMPACTION_NOTE,
    find_newest_marker,
    has_compaction_note,
    is_marker,
    make_summary_marker,
    parse_summary_marker,
    with_compaction_note,
)
from agent.compaction.plan import CompactionPlan, plan_compaction
from agent.compaction.prune import PRUNED_TOOL_OUTPUT, prune_tool_results
from agent.compaction.sanitize import STUB_TOOL_RESULT, find_orphans, sanitize_tool_pairs
from agent.compaction.summary_prompt import SUMMARY_TEMPLATE, build_summary_request
from agent.compaction.threshold import (
    Budgets,
    compute_budgets,
    resolve_model_threshold,
    summary_budget,
)

__all__ = [
    "COMPACTION_NOTE",
    "PRUNED_TOOL_OUTPUT",
    "STUB_TOOL_RESULT",
    "SUMMARY_TEMPLATE",
    "Boundaries",
    "Budgets",
    "CompactionPlan",
    "GuardState",
    "TailPolicy",
    "assemble_compacted",
    "build_local_summary",
    "build_summary_request",
    "compute_budgets",
    "find_newest_marker",
    "find_orphans",
    "has_compaction_note",
    "is_marker",
    "make_summary_marker",
    "parse_summary_marker",
    "plan_compaction",
    "prune_tool_results",
    "resolve_model_threshold",
    "sanitize_tool_pairs",
    "select_boundaries",
    "summary_budget",
    "with_compaction_note",
]
