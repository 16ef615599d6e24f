"""What background compaction hands back: a proposed transcript, adopted later with delta catch-up.

A pass (micro-compaction, or a batch compaction prepared ahead of the threshold) never writes.
It works from a snapshot of the transcript and proposes what should stand in its place. The
agent adopts the proposal at a turn boundary, holding the session's lock: everything appended
since the snapshot is kept after the proposed prefix ("delta catch-up"), so a turn never has to
wait for a pass, and a pass never loses what a turn added meanwhile. When the transcript no
longer starts with the snapshot (another compaction, or a reload after another worker's turn),
the proposal is dropped: its work is redone from the fresh state at the next opportunity.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from agent.messages import ChatMessage

if TYPE_CHECKING:
    from agent.context_engine import CompressResult

__all__ = ["Adopted", "Dropped", "Proposal", "ProposalKind", "catch_up"]

ProposalKind: TypeAlias = Literal["batch", "micro", "upgrade"]
"""`upgrade`: the model's summary for a stopgap's (`agent.stopgap`); not a compaction of its own."""
Adopted: TypeAlias = Callable[[list[ChatMessage]], Awaitable[None]]
"""Runs after the store committed the new transcript (its messages now carry row ids)."""
Dropped: TypeAlias = Callable[[str], Awaitable[None]]
"""Runs when the proposal is dropped unadopted, with why ("transcript_changed", ...)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """A transcript to adopt in place of `base`; see the module docstring."""

    kind: ProposalKind
    base: tuple[ChatMessage, ...]
    """The snapshot it was computed from: the very message objects of the live transcript."""
    prefix: list[ChatMessage]
    """What stands for `base` once adopted."""
    result: CompressResult | None = None
    """A batch proposal's engine result: the engine counts it when it is adopted."""
    on_adopted: Adopted | None = None
    on_dropped: Dropped | None = None


def catch_up(proposal: Proposal, live: Sequence[ChatMessage]) -> list[ChatMessage] | None:
    """The transcript to adopt: the proposed prefix, then everything appended since the
    snapshot. None when `live` no longer starts with the snapshot's very messages."""
    base = proposal.base
    if len(live) < len(base) or any(a is not b for a, b in zip(live, base, strict=False)):
        return None
    return [*proposal.prefix, *live[len(base) :]]
