"""Phase 2: pick the protected head and tail; pure functions over message lists.

The transcript is split as ``messages[:head_end]`` (head, kept), ``messages[head_end:tail_start]``
(middle, summarized) and ``messages[tail_start:]`` (tail, kept). Guarantees, in order of rank:
no tool_call/result group is split; the last real user message, `min_tail_user_messages` real user
messages and the newest whole exchange stay; the summary marker fits between head and tail without
two user (or two assistant) messages touching; the previous summary marker is never kept twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agent.compaction.markers import SummaryRole, is_marker
from agent.config import CompressionConfig
from agent.errors import CompactionRefused
from agent.messages import ChatMessage

__all__ = [
    "Boundaries",
    "TailPolicy",
    "budget_tail_start",
    "guarantee_start",
    "head_end",
    "newest_exchange_start",
    "pick_summary_role",
    "select_boundaries",
]

_CHAT_ROLES = ("user", "assistant")


@dataclass(frozen=True, slots=True, kw_only=True)
class TailPolicy:
    """How much to keep around the middle; from `compression.*`."""

    protect_first_n: int = 3
    tail_token_budget: int = 20_000
    protect_last_n: int = 20
    min_tail_user_messages: int = 1
    tail_mode: Literal["legacy", "lean"] = "legacy"

    @classmethod
    def from_config(cls, config: CompressionConfig, *, tail_token_budget: int) -> TailPolicy:
        """The policy `compression.*` asks for, with the tail budget the window allows."""
        return cls(
            protect_first_n=config.protect_first_n,
            tail_token_budget=tail_token_budget,
            protect_last_n=config.protect_last_n,
            min_tail_user_messages=config.min_tail_user_messages,
            tail_mode=config.tail_mode,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Boundaries:
    head_end: int
    tail_start: int
    guarantee_start: int
    """The latest index the tail may start at and still keep every guarantee."""
    marker_index: int | None
    """The newest previous summary marker, which lies in the middle, if any."""
    summary_role: SummaryRole


def head_end(messages: Sequence[ChatMessage], protect_first_n: int) -> int:
    """End of the head: `protect_first_n` messages, grown over trailing tool results, and cut
    before any summary marker (a marker is never part of the head)."""
    end = min(protect_first_n, len(messages))
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    for index in range(end):
        if is_marker(messages[index]):
            return index
    return end


def newest_exchange_start(messages: Sequence[ChatMessage], lo: int) -> int | None:
    """Index of the newest assistant message at or after `lo` (markers are not exchanges)."""
    for index in range(len(messages) - 1, lo - 1, -1):
        msg = messages[index]
        if msg.get("role") == "assistant" and not is_marker(msg):
            return index
    return None


def guarantee_start(
    messages: Sequence[ChatMessage],
    head: int,
    min_tail_user_messages: int,
    *,
    minimal: bool = False,
) -> int:
    """Latest tail start that keeps the newest exchange, the last real user message and
    `min_tail_user_messages` real user messages (those after the head), and a non-empty tail.

    `minimal` is the last resort when those do not fit the window: only the last real user
    message and what follows it; an exchange before it (a turn that failed with an oversized
    result, say) may then be summarized too.
    """
    total = len(messages)
    start = total - 1
    wanted = 1 if minimal else max(1, min_tail_user_messages)
    for index in range(total - 1, head - 1, -1):
        msg = messages[index]
        if msg.get("role") == "user" and not is_marker(msg):
            start = min(start, index)
            wanted -= 1
            if wanted == 0:
                break
    exchange = newest_exchange_start(messages, head)
    if exchange is not None and not (minimal and exchange < start):
        start = min(start, exchange)
    return _align_back(messages, max(start, head), head)


def budget_tail_start(tokens: Sequence[int], budget: int, lo: int) -> int:
    """Earliest index >= `lo` such that the messages from it to the end fit in `budget` tokens."""
    used = 0
    start = len(tokens)
    for index in range(len(tokens) - 1, lo - 1, -1):
        used += tokens[index]
        if used > budget:
            break
        start = index
    return start


def pick_summary_role(prev_role: str | None, next_role: str | None) -> SummaryRole | None:
    """A role for the marker that differs from both chat-role neighbours, or None if none does."""
    for role in ("user", "assistant"):
        if role != prev_role and role != next_role:
            return role
    return None


def select_boundaries(
    messages: Sequence[ChatMessage],
    tokens: Sequence[int],
    policy: TailPolicy,
    *,
    shrink: bool = False,
    minimal: bool = False,
) -> Boundaries:
    """Head, tail and marker role for one compaction; `shrink` keeps only the guarantees,
    `minimal` only the last resort's (see `guarantee_start`).

    Raises CompactionRefused when there is nothing between head and tail to summarize.
    """
    head = head_end(messages, policy.protect_first_n)
    if head >= len(messages):
        raise CompactionRefused("nothing to compact: the whole transcript is protected head")
    latest = guarantee_start(messages, head, policy.min_tail_user_messages, minimal=minimal)
    start = len(messages) if shrink else budget_tail_start(tokens, policy.tail_token_budget, head)
    if not shrink and policy.tail_mode == "legacy":
        start = min(start, len(messages) - policy.protect_last_n)
    start = _align_back(messages, max(head, min(start, latest)), head)
    if start <= head:
        raise CompactionRefused("nothing to compact: the protected tail reaches the head")
    marker = _newest_marker_after(messages, head)
    if marker is not None and start <= marker:
        start = marker + 1
        if start > latest or messages[start].get("role") == "tool":
            raise CompactionRefused("the protected tail reaches back past the previous summary")
    start, role = _fit_role(messages, head, start, marker, keep_start=minimal)
    if not any(not is_marker(m) for m in messages[head:start]):
        raise CompactionRefused("nothing to compact: no new messages between head and tail")
    return Boundaries(
        head_end=head,
        tail_start=start,
        guarantee_start=latest,
        marker_index=marker,
        summary_role=role,
    )


def _fit_role(
    messages: Sequence[ChatMessage],
    head: int,
    start: int,
    marker: int | None,
    *,
    keep_start: bool = False,
) -> tuple[int, SummaryRole]:
    """A tail start and marker role with no two same-role messages touching the marker; the
    start moves back until one fits. `keep_start` (the last resort) never moves it: a role
    unlike the tail's first message is taken even if it matches the head's last."""
    prev = _chat_role(messages[head - 1]) if head > 0 else None
    if keep_start and start > head:
        role = pick_summary_role(prev, _chat_role(messages[start]))
        return start, role or ("assistant" if _chat_role(messages[start]) == "user" else "user")
    floor = max(head, marker if marker is not None else head)
    while start > floor:
        role = pick_summary_role(prev, _chat_role(messages[start]))
        if role is not None:
            return start, role
        start = _align_back(messages, start - 1, head)
    raise CompactionRefused("nothing to compact: no summary role fits between head and tail")


def _chat_role(msg: ChatMessage) -> str | None:
    role = msg.get("role")
    return role if role in _CHAT_ROLES else None


def _align_back(messages: Sequence[ChatMessage], index: int, lo: int) -> int:
    """Walk back past tool results to their assistant so a call group is never split."""
    while index > lo and index < len(messages) and messages[index].get("role") == "tool":
        index -= 1
    return index


def _newest_marker_after(messages: Sequence[ChatMessage], lo: int) -> int | None:
    for index in range(len(messages) - 1, lo - 1, -1):
        if is_marker(messages[index]):
            return index
    return None
