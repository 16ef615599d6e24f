"""The seeded conversation generator: deterministic, findable, realistically shaped."""

from __future__ import annotations

import json
import random

import pytest

from sim.conversation import generate_conversation, idle_gap_s, tag_of, turn_index_of


def test_same_seed_same_conversation() -> None:
    """Two generations with one seed are equal; another seed differs."""
    first = generate_conversation(seed=3, turns=80)
    assert first == generate_conversation(seed=3, turns=80)
    assert first != generate_conversation(seed=4, turns=80)


def test_every_prompt_carries_its_own_unique_tag_last() -> None:
    """Each prompt names its turn's ticket as the last tag, so the model and the search find it."""
    turns = generate_conversation(seed=11, turns=300)
    assert len({t.tag for t in turns}) == 300
    for turn in turns:
        assert turn_index_of(turn.user_text) == turn.index
        assert turn.tag in turn.user_text


def test_conversation_mixes_tools_pastes_and_gaps() -> None:
    """A long run has tool rounds, long pastes, recalls through session_search and long idle gaps."""
    turns = generate_conversation(seed=7, turns=500)
    kinds = {t.kind for t in turns}
    assert {"explore", "implement", "test", "question", "paste", "recall"} <= kinds
    assert any(len(t.user_text) > 6000 for t in turns)
    assert max(t.gap_s for t in turns) > 2 * 3600
    assert sum(len(s) for t in turns for s in t.steps) > 500
    for turn in turns:
        assert len(turn.preambles) == len(turn.steps)
        for step in turn.steps:
            for call in step:
                assert isinstance(json.loads(call.arguments), dict)


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("fix it (HRM-1005)", 5),
        ("What did I ask for in HRM-1002? Check (HRM-1040).", 40),
        ("no tag here", None),
        ("HRM-12 is too short", None),
    ],
)
def test_turn_index_of_reads_the_last_tag(text: str, index: int | None) -> None:
    """The turn index comes from the last ticket tag in the text."""
    assert turn_index_of(text) == index


def test_tags_count_from_the_base() -> None:
    """Turn 0 is HRM-1000."""
    assert tag_of(0) == "HRM-1000"


def test_idle_gaps_range_from_seconds_to_hours() -> None:
    """Gaps stay between a few seconds and 14 hours, mostly short."""
    rng = random.Random(1)
    gaps = [idle_gap_s(rng) for _ in range(2000)]
    assert min(gaps) >= 8 and max(gaps) <= 14 * 3600
    assert sum(g < 300 for g in gaps) > 1000
    assert sum(g > 3600 for g in gaps) > 20
