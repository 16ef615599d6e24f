"""The recall probe's question in words: the request without any ticket tag."""

from __future__ import annotations

from sim.conversation import generate_conversation
from sim.probe import without_tags


def test_a_request_in_its_own_words_has_no_tag() -> None:
    """Every kind of request loses its ticket tags (a recall request names two) and the
    "Ticket" before one, and keeps every other word."""
    for turn in generate_conversation(seed=7, turns=200):
        words = without_tags(turn.user_text)
        assert "HRM-" not in words and "Ticket" not in words and "()" not in words
        assert words.split()[:2] == turn.user_text.split()[:2]
    assert (
        without_tags(
            "Change `x` in a.py to fix DNS failover; no new dependencies. Ticket HRM-1042."
        )
        == "Change `x` in a.py to fix DNS failover; no new dependencies. ."
    )
