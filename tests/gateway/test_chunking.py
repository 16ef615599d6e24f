"""Splitting long replies for platform limits: plain text, Discord markdown, Telegram HTML.

Limits: Telegram 4,096 characters after entity parsing (https://core.telegram.org/bots/api#sendmessage),
Discord 2,000 (https://discord.com/developers/docs/resources/message#create-message).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.platforms.chunking import split_for_limit, split_html, split_markdown
from gateway.platforms.telegram_format import markdown_to_telegram_html
from tests.fakes.telegram_rules import parse_html


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


# ---- markdown (Discord) ------------------------------------------------------------------

FENCE = "```"


def _fences_balanced(piece: str) -> bool:
    return sum(1 for line in piece.splitlines() if line.lstrip().startswith(FENCE)) % 2 == 0


def test_a_code_block_that_fits_moves_whole_to_the_next_message() -> None:
    """A cut never lands inside a fenced block that fits in one message."""
    code = FENCE + "python\n" + "\n".join(f"x = {i}" for i in range(40)) + "\n" + FENCE
    text = "intro " * 40 + "\n\n" + code
    pieces = split_markdown(text, limit=400)
    assert pieces[-1] == code
    assert all(_fences_balanced(p) for p in pieces)


def test_a_block_longer_than_a_message_is_closed_and_reopened_with_its_language() -> None:
    """Discord's 2,000 characters: each piece of a 6,000-character block is a block of its own,
    in the same language, and the code lines come back whole and in order."""
    lines = [f"    value_{i:04d} = compute({i})  # step" for i in range(150)]
    text = "Here:\n" + FENCE + "python\n" + "\n".join(lines) + "\n" + FENCE + "\nDone."
    pieces = split_markdown(text, limit=2000)
    assert len(pieces) >= 3 and all(len(p) <= 2000 for p in pieces)
    assert all(_fences_balanced(p) for p in pieces)
    assert all(FENCE + "python" in p for p in pieces[1:])
    body = [line for p in pieces for line in p.splitlines() if line.startswith("    value_")]
    assert body == lines


@given(
    st.lists(
        st.sampled_from(["word ", "\n", "\n\n", f"\n{FENCE}py\n", f"\n{FENCE}\n", "x" * 30, "`"]),
        max_size=200,
    ).map("".join),
    st.integers(min_value=16, max_value=400),
)
def test_markdown_pieces_fit_and_keep_every_character(text: str, limit: int) -> None:
    """No piece passes the limit; apart from fence lines added at cuts, nothing is lost."""
    pieces = split_markdown(text, limit=limit)
    assert all(0 < len(p) <= limit for p in pieces)
    assert "".join(_without_fences(p) for p in pieces) == _without_fences(text)


def _without_fences(text: str) -> str:
    kept = [line for line in text.splitlines() if line.strip() not in (FENCE, FENCE + "py")]
    return "".join("".join(kept).split())


# ---- Telegram HTML -----------------------------------------------------------------------


def test_html_cut_closes_and_reopens_the_tags_open_there() -> None:
    """A bold run longer than a message is bold in both pieces, each well formed."""
    html = "<b>" + "bold words " * 20 + "</b>"
    pieces = split_html(html, limit=100)
    assert len(pieces) >= 3
    for piece in pieces:
        assert piece.startswith("<b>") and piece.endswith("</b>") and len(piece) <= 100
        parse_html(piece)


def test_a_6000_character_code_block_becomes_well_formed_code_messages() -> None:
    """Telegram's 4,096: every piece is `<pre><code class="language-python">`, accepted by the
    Bot API's parser, and the code comes back line for line."""
    lines = [f"print('row {i:04d}: <{i}> & done')" for i in range(200)]
    markdown = "```python\n" + "\n".join(lines) + "\n```"
    assert len(markdown) > 6000
    pieces = split_html(markdown_to_telegram_html(markdown), limit=4096)
    assert len(pieces) >= 2
    texts = []
    for piece in pieces:
        assert len(piece) <= 4096
        assert piece.startswith('<pre><code class="language-python">')
        assert piece.endswith("</code></pre>")
        parsed = parse_html(piece)
        assert parsed.entities[0]["type"] == "pre" and parsed.entities[0]["language"] == "python"
        texts.append(parsed.text)
    assert "\n".join(texts).splitlines() == lines


def test_no_cut_splits_an_entity() -> None:
    """`&amp;` and friends stay whole even where a hard cut is needed."""
    html = "&amp;" * 100
    pieces = split_html(html, limit=64)
    assert "".join(pieces) == html
    assert all(p.endswith(";") for p in pieces)


@given(
    st.lists(
        st.sampled_from(
            ["word ", "\n", "\n\n", "<b>", "</b>", "<i>x</i>", "&lt;", "&amp;", "😀", "y" * 40,
             '<a href="https://e.com/?a=1&amp;b=2">link</a>', "<pre>code\nline</pre>"]
        ),
        max_size=150,
    ).map("".join),
    st.integers(min_value=64, max_value=500),
)  # fmt: skip
def test_html_pieces_fit_parse_and_keep_the_text(raw: str, limit: int) -> None:
    """Every piece is within the limit and accepted by Telegram; the text reads the same."""
    html = _balanced(raw)
    pieces = split_html(html, limit=limit)
    assert all(len(p) <= limit for p in pieces)
    texts = [parse_html(p).text for p in pieces]
    assert "".join("".join(t.split()) for t in texts) == "".join(parse_html(html).text.split())


def _balanced(raw: str) -> str:
    """Drop unmatched <b>/</b> so the input itself is valid Telegram HTML."""
    out, depth = [], 0
    for part in raw.replace("<b>", "\0<b>\0").replace("</b>", "\0</b>\0").split("\0"):
        if part == "<b>":
            if depth:
                continue
            depth += 1
        elif part == "</b>":
            if not depth:
                continue
            depth -= 1
        out.append(part)
    return "".join(out) + "</b>" * depth
