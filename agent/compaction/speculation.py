"""When to prepare a batch compaction ahead of the threshold, and when to swap it in: pure rules.

A batch compaction prepared in the background, off a snapshot, costs the user nothing while it
runs; swapping it in is one store write at a turn boundary. So it is prepared early, as soon as
the session's recent growth says the next turns will cross the threshold, and adopted late:
when the coming turn would cross it, or when the prompt cache has gone cold anyway (the rewrite
is free then, and every later request is smaller). Adopting earlier would compact more often,
each compaction one more summary call and one more cache write.

At a tight window (`agent.compaction.headroom.is_tight_window`) it is prepared one turn ahead,
not three: the turns appended after the snapshot stay verbatim when it is swapped in, so a pass
prepared k turns early leaves k turns less room, and a session compacts every
(snapshot - what a pass keeps) / growth turns. At 32K (24K threshold, some 3,100 tokens a turn)
three turns ahead meant a compaction every 3-4 turns whatever the plan. A summary not ready in
time costs no wait: the turn goes on past the threshold, and a request that would not fit gets
the local stopgap summary (`agent.stopgap`). And there a cold cache brings the swap forward by
one turn only (`COLD_ADOPT_TURNS`): at 32K, swapping in on every cold cache past half the
threshold compacted every 2.9 turns (238 of 349 compactions in 1,000 turns were such swaps).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.compaction.headroom import is_tight_window

__all__ = [
    "COLD_ADOPT_FLOOR",
    "COLD_ADOPT_TURNS",
    "GROWTH_WEIGHT",
    "SPECULATE_AT",
    "SPECULATE_FLOOR",
    "SPECULATE_TURNS_AHEAD",
    "TIGHT_TURNS_AHEAD",
    "Growth",
    "should_adopt_batch",
    "should_speculate",
]

SPECULATE_TURNS_AHEAD = 3.0
"""Prepare once the transcript is this many turns' growth short of the threshold: a slow local
summarizer (the seed's 30 s a pass; minutes for a large middle) then has a few idle gaps."""
TIGHT_TURNS_AHEAD = 1.0
"""... at a tight window, this many (see the module docstring); `SPECULATE_AT` does not apply."""
SPECULATE_AT = 0.8
"""... or once it passes this share of the threshold, whatever the growth: one paste can add
more than turns usually do, and preparing early costs nothing (adoption stays late)."""
SPECULATE_FLOOR = 0.5
"""Never prepare below this share of the threshold: there is too little middle to summarize."""
COLD_ADOPT_FLOOR = 0.5
"""A cold cache makes a swap free; below this share of the threshold it would still be churn."""
COLD_ADOPT_TURNS = 2.0
"""... at a tight window a swap long before it is needed is churn all the same (the room it
leaves unused is a few turns there): on a cold cache a prepared compaction is swapped in only
once this many turns' growth would cross the threshold (one turn before it is due)."""
GROWTH_WEIGHT = 0.5
"""Weight of the newest turn in the growth average: sessions change pace (a paste, a file)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Growth:
    """Tokens one turn adds, on average; learned turn by turn."""

    per_turn: float = 0.0
    last_tokens: int | None = None
    """The prompt size after the previous turn."""

    def after_turn(self, tokens: int) -> Growth:
        """The estimate once a turn ended at `tokens` (a drop, i.e. a compaction, teaches
        nothing about growth: it only moves the baseline)."""
        if self.last_tokens is None or tokens <= self.last_tokens:
            return Growth(per_turn=self.per_turn, last_tokens=tokens)
        sample = tokens - self.last_tokens
        average = (
            sample
            if self.per_turn == 0
            else (self.per_turn * (1 - GROWTH_WEIGHT) + sample * GROWTH_WEIGHT)
        )
        return Growth(per_turn=average, last_tokens=tokens)


def should_speculate(
    *, tokens: int, growth: Growth, threshold_tokens: int, context_length: int = 0
) -> bool:
    """Prepare a batch compaction now: the threshold is within a few turns' growth (one at a
    tight window)."""
    if threshold_tokens <= 0 or tokens < threshold_tokens * SPECULATE_FLOOR:
        return False
    if is_tight_window(context_length):
        return tokens + TIGHT_TURNS_AHEAD * growth.per_turn >= threshold_tokens
    if tokens >= threshold_tokens * SPECULATE_AT:
        return True
    return tokens + SPECULATE_TURNS_AHEAD * growth.per_turn >= threshold_tokens


def should_adopt_batch(
    *,
    tokens: int,
    incoming_tokens: int,
    growth: Growth,
    threshold_tokens: int,
    cache_cold: bool,
    context_length: int = 0,
) -> bool:
    """Swap a prepared batch compaction in at this turn boundary: the turn that starts now
    (its message plus a turn's growth) would cross the threshold, or the cache is cold (and, at
    a tight window, the next turn would: `COLD_ADOPT_TURNS`)."""
    if threshold_tokens <= 0:
        return False
    if tokens + incoming_tokens + growth.per_turn >= threshold_tokens:
        return True
    if not cache_cold:
        return False
    if is_tight_window(context_length):
        return tokens + incoming_tokens + COLD_ADOPT_TURNS * growth.per_turn >= threshold_tokens
    return tokens >= threshold_tokens * COLD_ADOPT_FLOOR
