"""Micro-compaction's view of a transcript: region, cursor, next exchange, splices; pure.

Layout after some passes (one rolling marker, user messages never absorbed)::

    head | [batch marker] | u2 u3 ... uk  MICRO-MARKER | cursor -> ... | protected tail

The head and the token-budgeted tail come from the batch compactor's `select_boundaries`, so the
two kinds of compaction protect exactly the same messages. A batch marker is never touched: the
micro region starts after the newest one, and the rolling summary starts fresh there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.compaction.boundary import TailPolicy, pick_summary_role, select_boundaries
from agent.compaction.markers import (
    UNANSWERED_MARK,
    SummaryRole,
    is_marker,
    is_micro_marker,
    make_micro_marker,
    parse_summary_marker,
)
from agent.errors import CompactionRefused
from agent.messages import ChatMessage, assistant_message, is_real_user_message

__all__ = [
    "Exchange",
    "MicroView",
    "defrag_absorbed",
    "absorbed_by",
    "find_exchange",
    "find_exchanges",
    "first_divergence",
    "locate_cursor",
    "marker_role",
    "splice_defrag",
    "splice_exchange",
    "view_transcript",
]

_CHAT_ROLES = ("user", "assistant")


@dataclass(frozen=True, slots=True, kw_only=True)
class MicroView:
    """Where micro-compaction may work in one transcript."""

    head_end: int
    region_start: int
    """First index it may touch: after the head and after the newest batch marker."""
    tail_start: int
    """First index of the protected tail."""
    marker_index: int | None
    """The rolling (micro) marker, if there is one in the region."""
    summary: str | None
    """The rolling summary text inside that marker."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """An assistant message and the tool results that follow it: `messages[start:end]`."""

    start: int
    end: int


def view_transcript(
    messages: Sequence[ChatMessage], tokens: Sequence[int], policy: TailPolicy
) -> MicroView | None:
    """The micro region, or None when head and tail leave nothing between them."""
    try:
        bounds = select_boundaries(messages, tokens, policy)
    except CompactionRefused:
        return None
    region_start, marker_index = bounds.head_end, None
    for index in range(len(messages) - 1, bounds.head_end - 1, -1):
        msg = messages[index]
        if not is_marker(msg):
            continue
        if is_micro_marker(msg) and marker_index is None:
            marker_index = index
            continue
        region_start = index + 1  # the newest batch marker: the region starts after it
        break
    if marker_index is not None and marker_index < region_start:
        marker_index = None
    summary = parse_summary_marker(messages[marker_index]) if marker_index is not None else None
    return MicroView(
        head_end=bounds.head_end,
        region_start=region_start,
        tail_start=bounds.tail_start,
        marker_index=marker_index,
        summary=summary,
    )


def locate_cursor(messages: Sequence[ChatMessage], view: MicroView, anchor_id: int | None) -> int:
    """The first message not yet absorbed.

    `anchor_id` is the row id of the message just before the in-memory cursor (the marker, or
    the last message of a skipped exchange). When it is missing or no longer in the region
    (a fresh process, a batch compaction), the cursor is recovered from the rolling marker.
    """
    floor = view.region_start if view.marker_index is None else view.marker_index + 1
    if anchor_id is not None:
        for index in range(len(messages) - 1, floor - 2, -1):
            if messages[index].get("_id") == anchor_id:
                return index + 1
    return floor


def find_exchange(messages: Sequence[ChatMessage], cursor: int, tail_start: int) -> Exchange | None:
    """The oldest exchange at or after `cursor`, walking past user messages; None if it would
    reach into the protected tail."""
    start = cursor
    while start < tail_start and not _is_exchange_start(messages[start]):
        start += 1
    if start >= tail_start:
        return None
    end = start + 1
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    if end > tail_start:
        return None
    return Exchange(start=start, end=end)


def marker_role(prev: ChatMessage | None, nxt: ChatMessage | None) -> SummaryRole:
    """A role unlike both neighbours if one exists, else unlike the next message.

    User messages are never absorbed, so two of them can end up adjacent around the marker;
    when no role fits, the marker at least never merges into the message after it.
    """
    prev_role, next_role = _chat_role(prev), _chat_role(nxt)
    role = pick_summary_role(prev_role, next_role)
    if role is not None:
        return role
    return "user" if next_role == "assistant" else "assistant"


def find_exchanges(messages: Sequence[ChatMessage], cursor: int, tail_start: int) -> list[Exchange]:
    """Every whole exchange from `cursor` up to the protected tail, oldest first."""
    found: list[Exchange] = []
    while (exchange := find_exchange(messages, cursor, tail_start)) is not None:
        found.append(exchange)
        cursor = exchange.end
    return found


def absorbed_by(messages: Sequence[ChatMessage], exchange: Exchange) -> list[ChatMessage]:
    """What folding `exchange` absorbs: its messages except the user's (never absorbed)."""
    return [m for m in messages[exchange.start : exchange.end] if not _stays(m)]


def splice_exchange(
    messages: Sequence[ChatMessage], view: MicroView, exchange: Exchange, summary: str
) -> tuple[list[ChatMessage], int]:
    """The transcript with `exchange` folded into the new rolling marker and the old marker
    dropped; and the new cursor. `exchange` may span several exchanges: the user messages
    between them stay, in place, before the marker (their replies are what it folded). A
    reply never stored before the marker gets an explicit `UNANSWERED_MARK` (see
    `_never_answered`). Every other message is the same object."""
    drop = view.marker_index
    out: list[ChatMessage] = []
    at = -1
    for index, msg in enumerate(messages):
        if index == exchange.end:
            at = len(out)
        if index == drop:
            continue
        if exchange.start <= index < exchange.end and not _stays(msg):
            continue
        if index < exchange.end and _never_answered(messages, index, view):
            out.append(assistant_message(UNANSWERED_MARK))
        out.append(msg)
    if at < 0:
        at = len(out)
    prev = out[at - 1] if at > 0 else None
    nxt = out[at] if at < len(out) else None
    marker = make_micro_marker(summary, marker_role(prev, nxt))
    out.insert(at, marker)
    return out, at + 1


def _never_answered(messages: Sequence[ChatMessage], index: int, view: MicroView) -> bool:
    """`messages[index]` is a user message right after another one, and no rolling marker put
    them side by side (between the region's start and the current marker every such pair is
    one whose reply an earlier fold absorbed): the first one's reply was never stored (a killed
    worker). Once the new marker lands after both they would read as a folded pair; the
    explicit mark keeps the record true (`agent.turn.well_formed` renders the two apart)."""
    if index == 0 or not is_real_user_message(messages[index]):
        return False
    if view.marker_index is not None and view.region_start <= index <= view.marker_index + 1:
        return False
    return is_real_user_message(messages[index - 1])


def defrag_absorbed(messages: Sequence[ChatMessage], view: MicroView) -> list[ChatMessage]:
    """What a defrag folds into the summary: every non-user message of the region before the
    tail, except markers (skipped exchanges included)."""
    return [m for m in messages[view.region_start : view.tail_start] if _absorbable(m)]


def splice_defrag(
    messages: Sequence[ChatMessage], view: MicroView, summary: str
) -> tuple[list[ChatMessage], int]:
    """Region reduced to its user messages (and stored `UNANSWERED_MARK`s, see
    `splice_exchange`) followed by one new marker; the cursor at the tail."""
    kept: list[ChatMessage] = []
    for index in range(view.region_start, view.tail_start):
        msg = messages[index]
        if _absorbable(msg) or is_micro_marker(msg):
            continue
        if _never_answered(messages, index, view):
            kept.append(assistant_message(UNANSWERED_MARK))
        kept.append(msg)
    if view.tail_start < len(messages) and _never_answered(messages, view.tail_start, view):
        kept.append(assistant_message(UNANSWERED_MARK))  # the marker will sit between them
    prev = kept[-1] if kept else (messages[view.region_start - 1] if view.region_start else None)
    nxt = messages[view.tail_start] if view.tail_start < len(messages) else None
    marker = make_micro_marker(summary, marker_role(prev, nxt))
    out = [*messages[: view.region_start], *kept, marker, *messages[view.tail_start :]]
    return out, _index_of(out, marker) + 1


def first_divergence(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> int:
    """Index of the first message that differs (by identity): where the prompt cache breaks."""
    for index, (a, b) in enumerate(zip(old, new, strict=False)):
        if a is not b:
            return index
    return min(len(old), len(new))


def _is_exchange_start(msg: ChatMessage) -> bool:
    return msg.get("role") == "assistant" and not is_marker(msg) and not _is_unanswered(msg)


def _absorbable(msg: ChatMessage) -> bool:
    return not _stays(msg) and not is_marker(msg)


def _stays(msg: ChatMessage) -> bool:
    """Never absorbed: what the user typed, and the record that a reply to it was lost."""
    return is_real_user_message(msg) or _is_unanswered(msg)


def _is_unanswered(msg: ChatMessage) -> bool:
    return msg.get("role") == "assistant" and msg.get("content") == UNANSWERED_MARK


def _chat_role(msg: ChatMessage | None) -> str | None:
    role = msg.get("role") if msg is not None else None
    return role if role in _CHAT_ROLES else None


def _index_of(messages: Sequence[ChatMessage], target: ChatMessage) -> int:
    return next(i for i, m in enumerate(messages) if m is target)
