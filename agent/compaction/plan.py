"""Plan one compaction before any model call: boundaries, pruning, floor and degrade level.

The floor is what cannot shrink: head (with its note), protected tail, and the summary cap plus
the marker's scaffolding. If it does not fit under the limit, degrade in order (prune tool output
inside the tail, then shrink the tail to its guarantees) or refuse with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.compaction.boundary import Boundaries, TailPolicy, select_boundaries
from agent.compaction.markers import (
    is_marker,
    make_summary_marker,
    parse_summary_marker,
    with_compaction_note,
)
from agent.compaction.prune import prune_tool_results
from agent.compaction.threshold import summary_budget
from agent.errors import CompactionRefused
from agent.messages import ChatMessage

__all__ = ["DEGRADE_DETAILS", "CompactionPlan", "plan_compaction"]

Measure = Callable[[ChatMessage], int]
MIN_GAIN_TOKENS = 64
"""A plan must be able to save more than this, even before the summary is counted."""
DEGRADE_DETAILS = ("", "tail_pruned", "tail_shrunk")
"""Level 0 keeps the tail verbatim; 1 clears old tool output in it; 2 also shrinks it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """Everything the async shell needs to summarize and assemble, decided up front."""

    head: list[ChatMessage]
    """The head as it will be sent: the system message carries the compaction note."""
    middle: list[ChatMessage]
    """What gets summarized, after phase-1 pruning; previous markers excluded."""
    middle_original: list[ChatMessage]
    """The middle before pruning, for the deterministic local summary."""
    tail: list[ChatMessage]
    boundaries: Boundaries
    previous_summary: str | None
    summary_budget: int
    floor_tokens: int
    """Head + tail + marker scaffolding + the summary budget: the most this plan can leave."""
    base_tokens: int
    """Head + tail + marker scaffolding: the least this plan can leave."""
    level: int
    detail: str
    pruned_count: int


def plan_compaction(
    messages: Sequence[ChatMessage],
    *,
    policy: TailPolicy,
    max_summary_tokens: int,
    limit_tokens: int,
    measure: Measure,
    previous_summary: str | None = None,
    max_level: int = len(DEGRADE_DETAILS) - 1,
) -> CompactionPlan:
    """The least degraded plan (up to `max_level`) whose floor fits in `limit_tokens`.

    Raises CompactionRefused with the reason when no allowed level fits.
    """
    tokens = [measure(m) for m in messages]
    total = sum(tokens)
    plan: CompactionPlan | None = None
    refusal: CompactionRefused | None = None
    for level in range(max_level + 1):
        try:
            plan = _plan_at_level(
                messages, tokens, policy, level, max_summary_tokens, measure, previous_summary
            )
        except CompactionRefused as exc:  # e.g. protect_last_n covers it all: degrade further
            refusal = exc
            continue
        if plan.floor_tokens <= limit_tokens and plan.base_tokens + MIN_GAIN_TOKENS < total:
            return plan
    if plan is None:
        assert refusal is not None
        raise refusal
    if plan.base_tokens + MIN_GAIN_TOKENS >= total:
        raise CompactionRefused("nothing to compact: the middle is too small to save tokens")
    raise CompactionRefused(
        f"protected context needs {plan.floor_tokens} tokens even with the tail shrunk to its "
        f"guarantees, more than the {limit_tokens} allowed"
    )


def _plan_at_level(
    messages: Sequence[ChatMessage],
    tokens: Sequence[int],
    policy: TailPolicy,
    level: int,
    max_summary_tokens: int,
    measure: Measure,
    previous_summary: str | None,
) -> CompactionPlan:
    bounds = select_boundaries(messages, tokens, policy, shrink=level >= 2)
    head_end, tail_start = bounds.head_end, bounds.tail_start
    pruned, count = prune_tool_results(messages, head_end, tail_start)
    if level >= 1:
        keep = range(bounds.guarantee_start, len(messages))
        pruned, in_tail = prune_tool_results(pruned, tail_start, len(messages), keep=keep)
        count += in_tail
    head = list(messages[:head_end])
    if head:
        head[0] = with_compaction_note(head[0])
    middle_idx = [i for i in range(head_end, tail_start) if i != bounds.marker_index]
    middle = [pruned[i] for i in middle_idx if not is_marker(messages[i])]
    original = [messages[i] for i in middle_idx if not is_marker(messages[i])]
    tail = list(pruned[tail_start:])
    # Every marker in the middle carries summary text (a batch marker and a newer micro marker
    # can both sit there): the next summary must build on all of them, oldest first.
    texts = [
        text
        for i in range(head_end, tail_start)
        if is_marker(messages[i]) and (text := parse_summary_marker(messages[i]))
    ]
    prev = "\n\n".join(texts) if texts else previous_summary
    budget = summary_budget(sum(measure(m) for m in middle), max_summary_tokens)
    scaffold = measure(make_summary_marker("", bounds.summary_role))
    base = sum(measure(m) for m in head) + sum(measure(m) for m in tail) + scaffold
    return CompactionPlan(
        head=head,
        middle=middle,
        middle_original=original,
        tail=tail,
        boundaries=bounds,
        previous_summary=prev,
        summary_budget=budget,
        floor_tokens=base + budget,
        base_tokens=base,
        level=level,
        detail=DEGRADE_DETAILS[level],
        pruned_count=count,
    )
