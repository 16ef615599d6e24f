"""Splitting long replies for platform limits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.platforms.chunking import split_for_limit


def test_short_text_is_one_piece() -> None:
    """Text under the limit is sent as it is."""
    assert split_for_limit("hello", limit=4096) == ["hello"]


def test_prefers_paragraph_then_line_boundaries() -> None:
    """A cut lands on a blank line before a newline, and on a newline before a space."""
    text = "a" * 30 + "\n\n" + "b" * 30 + "\n" + "c" * 30
    assert split_for_limit(text, limit=65) == ["a" * 30, "b" * 30 + "\n" + "c" * 30]
    assert split_for_limit("x" * 30 + "\n" + "y y y", limit=32) == ["x" * 30, "y y y"]


def test_telegram_limit_on_a_long_reply() -> None:
    """A 10,000-character reply becomes pieces of at most 4,096 characters."""
    text = "\n".join(f"line {i} " + "z" * 80 for i in range(115))
    pieces = split_for_limit(text, limit=4096)
    assert len(pieces) == 3
    assert all(len(p) <= 4096 for p in pieces)


@given(st.text(min_size=0, max_size=3000), st.integers(min_value=5, max_value=500))
def test_pieces_fit_and_keep_every_word(text: str, limit: int) -> None:
    """No piece passes the limit, and no non-space character is lost or reordered."""
    pieces = split_for_limit(text, limit=limit)
    assert all(0 < len(p) <= limit for p in pieces)
    assert "".join("".join(p.split()) for p in pieces) == "".join(text.split())
