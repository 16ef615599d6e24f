"""Proposals: the prefix a background pass computed, plus everything appended since."""

from __future__ import annotations

from agent.messages import assistant_message, system_message, user_message
from agent.proposals import Proposal, catch_up


def test_catch_up_keeps_what_was_appended_after_the_snapshot() -> None:
    """The proposal replaces the snapshot's messages; the turn's newer ones follow unchanged."""
    snapshot = [system_message("s"), user_message("a"), assistant_message("b")]
    prefix = [snapshot[0], assistant_message("summary of a, b")]
    live = [*snapshot, user_message("c"), assistant_message("d")]
    proposal = Proposal(kind="micro", base=tuple(snapshot), prefix=prefix)
    adopted = catch_up(proposal, live)
    assert adopted is not None
    assert adopted[:2] == prefix and adopted[2] is live[3] and adopted[3] is live[4]


def test_catch_up_refuses_a_transcript_that_no_longer_starts_with_the_snapshot() -> None:
    """Equal-looking copies do not count (a reload made new objects): only the very messages."""
    snapshot = [system_message("s"), user_message("a")]
    proposal = Proposal(kind="batch", base=tuple(snapshot), prefix=[snapshot[0]])
    reloaded = [dict(m) for m in snapshot]
    assert catch_up(proposal, reloaded) is None  # type: ignore[arg-type]
    assert catch_up(proposal, snapshot[:1]) is None
    assert catch_up(proposal, snapshot) == [snapshot[0]]
