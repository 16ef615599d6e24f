"""Split a reply into messages a platform accepts: pure, on paragraph, then line, then word bounds."""

from __future__ import annotations

__all__ = ["split_for_limit"]


def split_for_limit(text: str, *, limit: int) -> list[str]:
    """Cut `text` into pieces of at most `limit` characters, preferring natural boundaries.

    Paragraph breaks win over line breaks, line breaks over spaces; a run with no boundary at all
    is cut hard. Joining the pieces gives back the text, apart from the whitespace at the cuts.
    """
    if limit <= 0:
        raise ValueError("limit must be positive")
    text = text.strip()
    if not text:
        return []
    pieces: list[str] = []
    while len(text) > limit:
        cut = _best_cut(text, limit)
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return [p for p in pieces if p]


def _best_cut(text: str, limit: int) -> int:
    window = text[: limit + 1]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep, 0, limit + 1)
        if at > limit // 4:  # a boundary too early would leave a tiny piece
            return at if sep == " " else at + len(sep)
    return limit
