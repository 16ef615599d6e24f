"""Markdown → Telegram HTML: Telegram's tag subset, its escaping, and output Telegram accepts.

The contract is the Bot API's HTML style (https://core.telegram.org/bots/api#html-style); the
fake's parser (`tests.fakes.telegram_rules.parse_html`) applies the same rules and error texts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.platforms.telegram_format import (
    escape_html,
    html_to_plain,
    markdown_to_telegram_html,
)
from tests.fakes.telegram_rules import Refused, parse_html


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("**bold** and _it_", "<b>bold</b> and <i>it</i>"),
        ("~~gone~~", "<s>gone</s>"),
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("`x < 1`", "<code>x &lt; 1</code>"),
        ("# Title\n\ntext", "<b>Title</b>\n\ntext"),
        ("- one\n- two", "• one\n• two"),
        ("3. three\n4. four", "3. three\n4. four"),
        ("> quoted", "<blockquote>quoted</blockquote>"),
        ("[site](https://example.com/?a=1&b=2)", '<a href="https://example.com/?a=1&amp;b=2">site</a>'),
        ("[files](ftp://example.com/x)", "files"),
        ("<b>raw html</b>", "&lt;b&gt;raw html&lt;/b&gt;"),
        ("```python\nprint('<hi>')\n```", '<pre><code class="language-python">print(\'&lt;hi&gt;\')</code></pre>'),
        ("```\nplain\n```", "<pre>plain</pre>"),
        ("**bold `code` bold**", "<b>bold </b><code>code</code><b> bold</b>"),
        ("| a | b |\n|---|---|\n| 1 | 22 |", "<pre>a | b\n--+---\n1 | 22</pre>"),
        ("", ""),
    ],
)  # fmt: skip
def test_markdown_renders_in_telegrams_tags(markdown: str, html: str) -> None:
    """Each construct becomes Telegram's tag for it, and text is escaped the Bot API's way."""
    assert markdown_to_telegram_html(markdown) == html


def test_inline_code_closes_and_reopens_formatting_around_it() -> None:
    """Bold may not contain code (Bot API: "bold ... can contain ... any other entities, except
    pre and code"), so the entities come out side by side and Telegram parses them."""
    parsed = parse_html(markdown_to_telegram_html("**run `make` now**"))
    assert parsed.text == "run make now"
    assert [e["type"] for e in parsed.entities] == ["bold", "code", "bold"]


def test_a_code_block_keeps_its_language() -> None:
    """A fenced block with a language is one `pre` entity carrying that language."""
    parsed = parse_html(markdown_to_telegram_html("```rust\nfn main() {}\n```"))
    assert parsed.text == "fn main() {}"
    assert {"type": "pre", "language": "rust"}.items() <= parsed.entities[-1].items()


def test_plain_fallback_reads_like_the_rendered_message() -> None:
    """Without markup the message reads as Telegram would show it: tags gone, entities decoded."""
    html = markdown_to_telegram_html("**a & b** <c>")
    assert html_to_plain(html) == "a & b <c>" == parse_html(html).text


def test_escape_quotes_only_in_attributes() -> None:
    """`"` is escaped (as &quot;, one of the four named entities) only where asked."""
    assert escape_html('say "hi" & <go>') == 'say "hi" &amp; &lt;go&gt;'
    assert escape_html('"', quote=True) == "&quot;"


_MARKDOWNISH = st.lists(
    st.sampled_from([*"ab <>&*_~`#[]()|-:\n!\"'\\", "```", "**", "> ", "- ", "😀", "&amp;"]),
    max_size=120,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_MARKDOWNISH)
def test_any_markdown_becomes_html_telegram_accepts(markdown: str) -> None:
    """Whatever the model writes, the result parses under Telegram's rules (no 400)."""
    html = markdown_to_telegram_html(markdown)
    try:
        parse_html(html)
    except Refused as exc:  # pragma: no cover - the failure message is the evidence
        pytest.fail(f"{exc} for {html!r}")
