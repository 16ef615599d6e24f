"""Anchors: the `[#1203–#1219]` citations a summary carries to the archived rows it stands for.

Pure functions over text and row ids. An anchor names store row ids of the session, first to
last, inclusive; `recall` turns it back into the verbatim rows. A summary ends with an index line
that we write (never the summarizer), listing every range it covers, so anchors survive however
the model treats them: when a summary is adopted, anchors the model wrote are kept only if they
point at rows this summary or an earlier one stands for, and the index is rebuilt from the rows
just archived plus the anchors of the summaries it replaces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agent.messages import ChatMessage, is_summary_marker

__all__ = [
    "INDEX_PREFIX",
    "MAX_INDEX_ANCHORS",
    "Anchor",
    "anchors_for_ids",
    "cite_absorbed",
    "cite_summary",
    "find_anchors",
    "merge_anchors",
    "parse_anchor",
    "split_index",
    "validate_anchors",
    "with_index",
]

INDEX_PREFIX = "Archived rows (recall an anchor to read them verbatim):"
"""Starts the index line at the end of every summary; written here, parsed here."""
MAX_INDEX_ANCHORS = 16
"""An index keeps at most this many ranges: the closest neighbours merge (still exact bounds,
only coarser: recall pages through what a wider range holds)."""
_MAX_ID = 10**15
_ANCHOR_RE = re.compile(r"\[\s*#\s*(\d{1,15})\s*(?:(?:[-–—]|\.\.)\s*#?\s*(\d{1,15})\s*)?\]")
_MANGLED_RE = re.compile(r"\[\s*#[^\]\n]{0,40}\]")
"""Anything that starts like an anchor; what is not a valid one points at nothing."""
_DROPPED = "\x00"
_DROPPED_RE = re.compile(
    r"[ \t]*\(\s*(?:(?:see|cf\.?|rows?)\s+)?(?:\x00[\s,;]*)+\)|[ \t]*\x00", re.I
)
"""A dropped anchor leaves no trace: nor the space before it, nor empty brackets around it."""
_LOOSE_RE = re.compile(
    r"^\s*\[?\s*#?\s*(\d{1,15})\s*(?:(?:[-–—:]|\.\.)\s*#?\s*(\d{1,15}))?\s*\]?\s*$"
)


@dataclass(frozen=True, slots=True, order=True)
class Anchor:
    """Row ids `first` to `last` (inclusive) of one session."""

    first: int
    last: int

    def __str__(self) -> str:
        if self.first == self.last:
            return f"[#{self.first}]"
        return f"[#{self.first}–#{self.last}]"

    def overlaps(self, other: Anchor) -> bool:
        return self.first <= other.last and other.first <= self.last


def _anchor(a: int, b: int | None) -> Anchor | None:
    first, last = (a, a) if b is None else (min(a, b), max(a, b))
    if first < 1 or last > _MAX_ID:
        return None
    return Anchor(first=first, last=last)


def parse_anchor(text: str) -> Anchor | None:
    """An anchor as a tool argument: `[#1203–#1219]`, `#1203-1219`, `1203..1219` or `1203`."""
    match = _LOOSE_RE.match(text or "")
    if match is None:
        return None
    return _anchor(int(match.group(1)), int(match.group(2)) if match.group(2) else None)


def find_anchors(text: str) -> list[Anchor]:
    """Every well-formed anchor in `text`, in order of appearance."""
    found = []
    for match in _ANCHOR_RE.finditer(text or ""):
        anchor = _anchor(int(match.group(1)), int(match.group(2)) if match.group(2) else None)
        if anchor is not None:
            found.append(anchor)
    return found


def anchors_for_ids(ids: Iterable[int], *, breaks: Iterable[int] = ()) -> list[Anchor]:
    """The fewest ranges covering `ids`; a range never spans a row id in `breaks` (rows that
    stay in the active context, such as the tail)."""
    wanted = sorted({i for i in ids if isinstance(i, int) and 0 < i <= _MAX_ID})
    if not wanted:
        return []
    stops = sorted({b for b in breaks if isinstance(b, int)} - set(wanted))
    ranges: list[Anchor] = []
    start = prev = wanted[0]
    cursor = 0
    for row_id in wanted[1:]:
        while cursor < len(stops) and stops[cursor] <= prev:
            cursor += 1
        if cursor < len(stops) and stops[cursor] < row_id:
            ranges.append(Anchor(first=start, last=prev))
            start = row_id
        prev = row_id
    ranges.append(Anchor(first=start, last=prev))
    return ranges


def merge_anchors(anchors: Iterable[Anchor], *, limit: int = MAX_INDEX_ANCHORS) -> list[Anchor]:
    """Sorted, overlapping and touching ranges joined; then the closest neighbours merged until
    at most `limit` remain."""
    merged: list[Anchor] = []
    for anchor in sorted(anchors):
        if merged and anchor.first <= merged[-1].last + 1:
            last = max(merged[-1].last, anchor.last)
            merged[-1] = Anchor(first=merged[-1].first, last=last)
        else:
            merged.append(anchor)
    while len(merged) > max(1, limit):
        gaps = [merged[i + 1].first - merged[i].last for i in range(len(merged) - 1)]
        i = gaps.index(min(gaps))
        merged[i : i + 2] = [Anchor(first=merged[i].first, last=merged[i + 1].last)]
    return merged


def validate_anchors(text: str, known: Sequence[Anchor]) -> str:
    """`text` with every anchor normalized when it overlaps a `known` range and removed when it
    points at nothing (a malformed `[#…]` included)."""

    def replace(match: re.Match[str]) -> str:
        whole = match.group(0)
        exact = _ANCHOR_RE.fullmatch(whole)
        if exact is None:
            return _DROPPED
        anchor = _anchor(int(exact.group(1)), int(exact.group(2)) if exact.group(2) else None)
        if anchor is None or not any(anchor.overlaps(k) for k in known):
            return _DROPPED
        return str(anchor)

    cleaned = _MANGLED_RE.sub(replace, text.replace(_DROPPED, ""))
    return _DROPPED_RE.sub("", cleaned)


def split_index(summary: str) -> tuple[str, list[Anchor]]:
    """The summary without its index line(s), and the anchors they listed."""
    body: list[str] = []
    index: list[Anchor] = []
    for line in (summary or "").splitlines():
        if line.startswith(INDEX_PREFIX):
            index.extend(find_anchors(line))
        else:
            body.append(line)
    return "\n".join(body).rstrip(), index


def with_index(body: str, anchors: Iterable[Anchor]) -> str:
    """`body` followed by one index line listing `anchors` (none: `body` unchanged)."""
    listed = merge_anchors(anchors)
    if not listed:
        return body.rstrip()
    return f"{body.rstrip()}\n\n{INDEX_PREFIX} " + " ".join(str(a) for a in listed)


def cite_summary(
    summary: str,
    *,
    new_ids: Iterable[int],
    previous: str | None = None,
    breaks: Iterable[int] = (),
) -> str:
    """The summary as adopted: the model's anchors checked, the index rebuilt.

    `new_ids` are the rows this summary now stands for (being archived); `previous` is the text
    of the summaries it replaces, whose anchors (index and inline) it inherits.
    """
    inherited = find_anchors(previous or "")
    fresh = anchors_for_ids(new_ids, breaks=breaks)
    known = [*inherited, *fresh]
    body, _ = split_index(summary)
    return with_index(validate_anchors(body, known), known)


def cite_absorbed(
    summary: str,
    *,
    absorbed: Sequence[ChatMessage],
    transcript: Sequence[ChatMessage],
    previous: str | None = None,
) -> str:
    """`cite_summary` for a compaction that folds `absorbed` (messages of `transcript`) into
    `summary`: ranges cover the absorbed rows and never span a row that stays active."""
    new_ids = [i for m in absorbed if (i := _row_id(m)) is not None]
    taken = set(new_ids)
    breaks = [
        i
        for m in transcript
        if (i := _row_id(m)) is not None and i not in taken and not is_summary_marker(m)
    ]
    return cite_summary(summary, new_ids=new_ids, previous=previous, breaks=breaks)


def _row_id(msg: ChatMessage) -> int | None:
    value = msg.get("_id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
