"""Phase 4: head, one summary marker, the tail; then tool pairs made whole."""

from __future__ import annotations

from collections.abc import Sequence

from agent.compaction.markers import SummaryRole, make_summary_marker
from agent.compaction.sanitize import sanitize_tool_pairs
from agent.messages import ChatMessage

__all__ = ["assemble_compacted"]


def assemble_compacted(
    head: Sequence[ChatMessage],
    summary_text: str,
    role: SummaryRole,
    tail: Sequence[ChatMessage],
) -> list[ChatMessage]:
    """The new active transcript. Carried messages are the same objects (ids and stamps kept)."""
    return sanitize_tool_pairs([*head, make_summary_marker(summary_text, role), *tail])
