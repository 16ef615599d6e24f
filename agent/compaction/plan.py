"""Plan one compaction before any model call: boundaries, pruning, floor and degrade level.

The floor is what cannot shrink: head (with its note), protected tail, and the summary cap plus
the marker's scaffolding. If it does not fit under the limit, degrade in order (`Degrade`), so
that a session can never be bricked by what it must keep:

0. `TAIL_VERBATIM`: keep the tail verbatim;
1. `TAIL_PRUNED`: clear old tool output inside the tail, outside the guarantees;
2. `TAIL_SHRUNK`: shrink the tail to its guarantees (head, last user message, newest exchange);
   with `clear_head` (a tight window, `agent.compaction.headroom`) also clear the head's old
   tool output (the rows stay archived);
3. `GUARANTEES_CUT`: cut the tool outputs inside the guarantees to what fits (the rows stay
   archived);
4. `GUARANTEES_FOLDED`: last resort: keep the system prompt, the last user message and what
   follows it; summarize the rest, the head's first exchange included.

Only when even that does not fit (one message larger than the window) is it refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum

from agent.compaction.boundary import Boundaries, TailPolicy, select_boundaries
from agent.compaction.boundary import head_end as find_head_end
from agent.compaction.markers import (
    is_marker,
    make_summary_marker,
    parse_summary_marker,
    with_compaction_note,
)
from agent.compaction.prune import prune_tool_results, truncate_tool_results
from agent.compaction.threshold import summary_budget
from agent.errors import CompactionRefused
from agent.messages import ChatMessage, is_real_user_message

__all__ = ["DEGRADE_DETAILS", "MAX_LEVEL", "CompactionPlan", "Degrade", "plan_compaction"]

Measure = Callable[[ChatMessage], int]
MIN_GAIN_TOKENS = 64
"""A plan must be able to save more than this, even before the summary is counted."""


class Degrade(IntEnum):
    """How far a plan degrades to fit (see the module docstring); each level does what the ones
    before it do, and more."""

    TAIL_VERBATIM = 0
    TAIL_PRUNED = 1
    TAIL_SHRUNK = 2
    GUARANTEES_CUT = 3
    GUARANTEES_FOLDED = 4

    @property
    def detail(self) -> str:
        """The level as telemetry and `CompressResult.detail` name it ("" for none)."""
        return "" if self is Degrade.TAIL_VERBATIM else self.name.lower()


DEGRADE_DETAILS = tuple(level.detail for level in Degrade)
"""Each level's detail, indexed by its number."""
MAX_LEVEL = max(Degrade)


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
    level: Degrade
    detail: str
    pruned_count: int
    cleared_head: tuple[ChatMessage, ...] = ()
    """The head's tool rows as they were, where `clear_head` cleared them: archived with the
    middle, so the summary cites them (recallable by anchor) though it does not summarize them."""


def plan_compaction(
    messages: Sequence[ChatMessage],
    *,
    policy: TailPolicy,
    max_summary_tokens: int,
    limit_tokens: int,
    measure: Measure,
    previous_summary: str | None = None,
    min_level: Degrade = Degrade.TAIL_VERBATIM,
    max_level: Degrade = MAX_LEVEL,
    clear_head: bool = False,
) -> CompactionPlan:
    """The least degraded plan (from `min_level` up to `max_level`) whose floor fits in
    `limit_tokens`.

    Raises CompactionRefused with the reason when no allowed level fits.
    """
    tokens = [measure(m) for m in messages]
    total = sum(tokens)
    plan: CompactionPlan | None = None
    refusal: CompactionRefused | None = None
    for level in Degrade:
        if level < min_level:
            continue
        if level > max_level:
            break
        try:
            plan = _plan_at_level(
                messages,
                tokens,
                policy,
                level,
                max_summary_tokens,
                measure,
                previous_summary,
                limit_tokens,
                clear_head=clear_head,
            )
        except CompactionRefused as exc:  # e.g. protect_last_n covers it all: degrade further
            refusal = exc
            continue
        if plan.floor_tokens > limit_tokens:
            continue  # only what does not fit degrades further
        if plan.base_tokens + MIN_GAIN_TOKENS < total:
            return plan
        raise CompactionRefused("nothing to compact: the middle is too small to save tokens")
    if plan is None:
        assert refusal is not None
        raise refusal
    raise CompactionRefused(_too_big(messages, plan, limit_tokens, measure))


def _too_big(
    messages: Sequence[ChatMessage], plan: CompactionPlan, limit_tokens: int, measure: Measure
) -> str:
    """One sentence that says what does not fit, for the person who has to act on it."""
    users = [m for m in messages if is_real_user_message(m)]
    if users and measure(users[-1]) > limit_tokens:
        return (
            f"the last message is about {measure(users[-1]):,} tokens, more than the "
            f"{limit_tokens:,} this model's window leaves for the conversation; send it in "
            "smaller parts"
        )
    return (
        f"what must be kept needs {plan.floor_tokens:,} tokens even at degrade level "
        f"{int(plan.level)} ({plan.detail or 'tail verbatim'}), more than the {limit_tokens:,} "
        "this model's window leaves"
    )


def _plan_at_level(
    messages: Sequence[ChatMessage],
    tokens: Sequence[int],
    policy: TailPolicy,
    level: Degrade,
    max_summary_tokens: int,
    measure: Measure,
    previous_summary: str | None,
    limit_tokens: int,
    *,
    clear_head: bool = False,
) -> CompactionPlan:
    folded = level >= Degrade.GUARANTEES_FOLDED
    if folded:  # the last resort keeps of the head only the system prompt
        policy = replace(policy, protect_first_n=1)
    try:
        bounds = select_boundaries(
            messages, tokens, policy, shrink=level >= Degrade.TAIL_SHRUNK, minimal=folded
        )
    except CompactionRefused:
        if level < Degrade.GUARANTEES_CUT:
            raise
        bounds = _nothing_between(messages, policy)  # what it keeps is all there is: cut it
    head_end, tail_start = bounds.head_end, bounds.tail_start
    pruned, count = prune_tool_results(messages, head_end, tail_start)
    if level >= Degrade.TAIL_PRUNED:
        keep = range(bounds.guarantee_start, len(messages))
        pruned, in_tail = prune_tool_results(pruned, tail_start, len(messages), keep=keep)
        count += in_tail
    cleared_head: tuple[ChatMessage, ...] = ()
    if clear_head and level >= Degrade.TAIL_SHRUNK and tail_start > head_end:
        pruned, in_head = prune_tool_results(pruned, 0, head_end)
        count += in_head
        pairs = zip(messages[:head_end], pruned[:head_end], strict=True)
        cleared_head = tuple(m for m, new in pairs if m is not new)
    head = list(pruned[:head_end])
    if head and tail_start > head_end:
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
    budget = summary_budget(sum(measure(m) for m in middle), max_summary_tokens) if middle else 0
    scaffold = measure(make_summary_marker("", bounds.summary_role)) if middle else 0
    if (
        level >= Degrade.GUARANTEES_CUT
    ):  # what the rest leaves for the tool outputs it must keep: cut them to that
        kept = [*head, *tail]
        fixed = sum(measure(m) for m in kept if m.get("role") != "tool")
        cut_list, cut = truncate_tool_results(
            kept,
            0,
            len(kept),
            room_tokens=limit_tokens - fixed - scaffold - budget,
            measure=measure,
        )
        head, tail = cut_list[: len(head)], cut_list[len(head) :]
        count += cut
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
        detail=level.detail,
        pruned_count=count,
        cleared_head=cleared_head,
    )


def _nothing_between(messages: Sequence[ChatMessage], policy: TailPolicy) -> Boundaries:
    """Boundaries with an empty middle: everything is head or guaranteed tail."""
    end = find_head_end(messages, policy.protect_first_n)
    return Boundaries(
        head_end=end, tail_start=end, guarantee_start=end, marker_index=None, summary_role="user"
    )
