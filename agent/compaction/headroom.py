"""How much room a batch compaction must free: about ten turns of the session's recent growth.

A pass that lands just under the threshold fires again a turn or two later: each time one more
summary call, one more cache write, one more wait on a slow server (at a 32K window the seed's
policy compacted every 1.8 turns). So an automatic pass aims to leave `ROOM_TURNS` turns of the
session's recent growth free below the threshold (at most half of it), measured from the transcript itself (the
tokens of its newest `GROWTH_SAMPLE_TURNS` user turns, per turn). Where the verbatim tail cannot
give that much, the plan degrades the tail (`agent.compaction.plan`: prune its old tool output,
then keep only the guarantees), never the guarantees themselves; where even that cannot, the pass
keeps what the guarantees leave and frees the most it can. Pure functions over values.

At a tight window (`TIGHT_WINDOW_TOKENS`) the share cap does not apply: there, ten turns of a
working session's growth are more than half the threshold (the seed's coding session adds some
3,100 tokens a turn against a 24K threshold at 32K), and a pass capped at half of it keeps three
or four turns verbatim only to compact again three or four turns later, each time one more
summary call and one more rewrite of the prompt cache. So a pass there frees what the ten turns
ask for, down to the guarantees (the tail shrunk, `Degrade.TAIL_SHRUNK`), never below them; and
a plan shrunk that far also clears the head's old tool output (`Aim.clear_head`): the protected
head keeps the session's first request, but the file its first turn read (2,800 tokens in the
seed's session, a ninth of the threshold) stays archived and searchable, not in every request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.compaction.markers import is_marker
from agent.compaction.plan import Degrade
from agent.messages import ChatMessage, is_real_user_message

__all__ = [
    "GROWTH_SAMPLE_TURNS",
    "MAX_ROOM_SHARE",
    "ROOM_TURNS",
    "TIGHT_ROOM_SHARE",
    "TIGHT_WINDOW_TOKENS",
    "Aim",
    "compaction_aims",
    "is_tight_window",
    "max_room_share",
    "recent_growth_per_turn",
]

ROOM_TURNS = 10
"""An automatic compaction frees room for this many turns of recent growth."""
GROWTH_SAMPLE_TURNS = 5
"""Recent growth is the mean over this many of the newest user turns."""
MAX_ROOM_SHARE = 0.5
"""... but never more room than this share of the threshold: a session whose turns are each a
tenth of the window (a file read whole, a long log) would otherwise keep nothing verbatim but
its last turn; past this, keeping context beats saving a compaction."""
TIGHT_WINDOW_TOKENS = 64_000
"""Windows below this many tokens are tight: half their threshold is a few turns of a working
session, so the share cap would buy churn, not context."""
TIGHT_ROOM_SHARE = 1.0
"""The cap at a tight window: none but the guarantees (the plan never degrades below them for
room; see `compaction_aims`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Aim:
    """One attempt at a plan: land at or below `limit_tokens`, degrading between the levels."""

    limit_tokens: int
    min_level: Degrade = Degrade.TAIL_VERBATIM
    max_level: Degrade = Degrade.GUARANTEES_FOLDED
    clear_head: bool = False
    """At `Degrade.TAIL_SHRUNK` and past it, clear the head's old tool output too (a tight
    window: `is_tight_window`)."""


def recent_growth_per_turn(
    messages: Sequence[ChatMessage],
    measure: Callable[[ChatMessage], int],
    *,
    turns: int = GROWTH_SAMPLE_TURNS,
) -> float:
    """Tokens a user turn adds, on average over the newest `turns` turns: everything from the
    oldest of those user messages to the end (summary markers excluded), per turn. 0 without a
    user message."""
    starts = [i for i, m in enumerate(messages) if is_real_user_message(m)]
    if not starts or turns <= 0:
        return 0.0
    sample = starts[-turns:]
    added = sum(measure(m) for m in messages[sample[0] :] if not is_marker(m))
    return added / len(sample)


def is_tight_window(context_length: int) -> bool:
    """A known window under `TIGHT_WINDOW_TOKENS` (0 means unknown: not tight)."""
    return 0 < context_length < TIGHT_WINDOW_TOKENS


def max_room_share(context_length: int) -> float:
    """The most of the threshold a pass may free for room: `MAX_ROOM_SHARE`, or
    `TIGHT_ROOM_SHARE` at a tight window (`is_tight_window`)."""
    return TIGHT_ROOM_SHARE if is_tight_window(context_length) else MAX_ROOM_SHARE


def compaction_aims(
    *,
    threshold_tokens: int,
    target_tokens: int,
    growth_per_turn: float,
    context_length: int = 0,
) -> tuple[Aim, ...]:
    """The plans to try, most wanted first, for an automatic pass whose usual target is
    `target_tokens` (a share of the threshold, overhead taken off).

    1. Room for `ROOM_TURNS` turns below the threshold (at most `max_room_share` of it for
       the window of `context_length`, 0 if unknown), the tail degraded at most to its
       guarantees (skipped when the usual target already leaves that much room, or when the
       room asked for is the whole threshold);
    2. where that is out of reach: the tail at its guarantees, which frees the most any plan
       can without cutting what must be kept;
    3. the usual target, degrading as far as the never-brick rules allow.

    At a tight window every aim clears the head's old tool output once it shrinks the tail.
    """
    wanted = math.ceil(ROOM_TURNS * max(0.0, growth_per_turn))
    room = min(wanted, int(threshold_tokens * max_room_share(context_length)))
    room_limit = min(threshold_tokens - room, target_tokens)
    clear = is_tight_window(context_length)
    aims: list[Aim] = []
    if room_limit < target_tokens:
        if room_limit > 0:
            aims.append(
                Aim(limit_tokens=room_limit, max_level=Degrade.TAIL_SHRUNK, clear_head=clear)
            )
        aims.append(
            Aim(
                limit_tokens=target_tokens,
                min_level=Degrade.TAIL_SHRUNK,
                max_level=Degrade.TAIL_SHRUNK,
                clear_head=clear,
            )
        )
    aims.append(Aim(limit_tokens=target_tokens, clear_head=clear))
    return tuple(aims)
