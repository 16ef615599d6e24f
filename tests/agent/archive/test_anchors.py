"""Anchors from summaries to archived rows: parsing, ranges, validation, the index line."""

from __future__ import annotations

import pytest

from agent.archive.anchors import (
    INDEX_PREFIX,
    MAX_INDEX_ANCHORS,
    Anchor,
    anchors_for_ids,
    cite_summary,
    find_anchors,
    merge_anchors,
    parse_anchor,
    split_index,
    validate_anchors,
)


@pytest.mark.parametrize(
    ("text", "anchor"),
    [
        ("[#1203–#1219]", Anchor(first=1203, last=1219)),
        ("#1203-1219", Anchor(first=1203, last=1219)),
        ("1219..1203", Anchor(first=1203, last=1219)),
        (" 42 ", Anchor(first=42, last=42)),
        ("[#7]", Anchor(first=7, last=7)),
        ("#0", None),
        ("HRM-1042", None),
        ("", None),
        ("1" * 40, None),
    ],
)
def test_parse_anchor_accepts_the_forms_a_model_writes(text: str, anchor: Anchor | None) -> None:
    """Tool arguments name an anchor in any of the usual spellings; nonsense is None."""
    assert parse_anchor(text) == anchor


def test_find_anchors_normalizes_dashes_and_order() -> None:
    """En dash, hyphen and em dash all read; a reversed range is put in order."""
    text = "see [#5–#9], [#12-#10] and [# 30 ] but not [#x] or #40"
    assert find_anchors(text) == [Anchor(5, 9), Anchor(10, 12), Anchor(30, 30)]


@pytest.mark.parametrize(
    ("ids", "breaks", "expected"),
    [
        ([5, 6, 7, 9], [], [Anchor(5, 9)]),
        ([5, 6, 7, 9], [8], [Anchor(5, 7), Anchor(9, 9)]),
        ([9, 5, 5, 6], [1, 100], [Anchor(5, 9)]),
        ([], [3], []),
        ([3], [3], [Anchor(3, 3)]),
    ],
)
def test_anchors_for_ids_split_only_at_rows_that_stay(
    ids: list[int], breaks: list[int], expected: list[Anchor]
) -> None:
    """Ranges are as few as possible but never span a row that stays in the active context."""
    assert anchors_for_ids(ids, breaks=breaks) == expected


def test_merge_anchors_joins_then_caps_by_closest_gap() -> None:
    """Overlapping and touching ranges join; past the cap the closest neighbours merge."""
    assert merge_anchors([Anchor(1, 3), Anchor(4, 6), Anchor(5, 9)]) == [Anchor(1, 9)]
    many = [Anchor(i * 10, i * 10 + 2) for i in range(40)]
    capped = merge_anchors(many, limit=MAX_INDEX_ANCHORS)
    assert len(capped) == MAX_INDEX_ANCHORS
    assert capped[0].first == 0 and capped[-1].last == 392
    assert all(any(c.first <= a.first and a.last <= c.last for c in capped) for a in many)


def test_validate_drops_anchors_pointing_at_nothing() -> None:
    """Kept: anchors overlapping known rows (normalized). Dropped: unknown rows and mangled ones."""
    text = "Retry fixed [#12-#14]. Invented (see [#900]). Mangled [#1O3] here [#]. Fine [#20]."
    out = validate_anchors(text, [Anchor(10, 15), Anchor(20, 20)])
    assert out == "Retry fixed [#12–#14]. Invented. Mangled here. Fine [#20]."


def test_cite_summary_rebuilds_the_index_and_inherits_anchors() -> None:
    """The adopted summary lists new rows and the previous summary's anchors, whatever the model
    did to them; a second pass keeps the first pass's rows."""
    first = cite_summary("## Goal\nfix retries [#3]", new_ids=[1, 2, 3, 4], breaks=[5])
    body, index = split_index(first)
    assert body == "## Goal\nfix retries [#3]" and index == [Anchor(1, 4)]
    # The model dropped every anchor and invented one; the index still carries rows 1-4.
    second = cite_summary(
        f"## Goal\nrewritten [#777]\n{INDEX_PREFIX} [#9999]",
        new_ids=[6, 7],
        previous=first,
        breaks=[5, 8],
    )
    body, index = split_index(second)
    assert "[#777]" not in body and "9999" not in second
    assert index == [Anchor(1, 4), Anchor(6, 7)]
    assert second.count(INDEX_PREFIX) == 1
