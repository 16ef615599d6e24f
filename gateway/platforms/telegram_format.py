"""Model markdown as Telegram HTML: markdown-it-py's tokens rendered in Telegram's tag subset.

Telegram's HTML style (https://core.telegram.org/bots/api#html-style) knows only `b`, `i`, `u`,
`s`, `tg-spoiler`, `a href`, `code`, `pre` (with `<code class="language-…">` inside for the
language) and `blockquote`; every `<`, `>` and `&` that is not markup must be an entity, and
the only named entities are `&lt;`, `&gt;`, `&amp;` and `&quot;`. So headings become bold
lines, lists get bullets or numbers, tables a `<pre>` grid, and a link with a scheme Telegram
would not open stays plain text. Bold, italic and strikethrough may not contain or be inside
`code`/`pre` (the same page, "Message entities can be nested…"), so formatting is closed around
inline code and reopened after it. Raw HTML in the model's text is shown as typed.

Pure functions; `split_telegram_html` (in `gateway.platforms.html_split`) cuts the result.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt

if TYPE_CHECKING:
    from markdown_it.token import Token

__all__ = ["escape_html", "html_to_plain", "markdown_to_telegram_html"]

_LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_LANGUAGE = re.compile(r"^[A-Za-z0-9_+#.-]{1,32}$")
_TAG = re.compile(r"<[^>]*>")
_MANY_NEWLINES = re.compile(r"\n{3,}")
_FORMAT_TAGS = {"strong": "b", "em": "i", "s": "s"}
_RULE = "———"


def escape_html(text: str, *, quote: bool = False) -> str:
    """Text as Telegram HTML shows it verbatim: `&`, `<`, `>` (and `"` in attributes) escaped."""
    escaped = html.escape(text, quote=False)
    return escaped.replace('"', "&quot;") if quote else escaped


def html_to_plain(text: str) -> str:
    """What a Telegram HTML message reads as without its markup (the fallback when Telegram
    rejects an entity): tags dropped, entities decoded."""
    return html.unescape(_TAG.sub("", text))


def markdown_to_telegram_html(markdown: str) -> str:
    """Render `markdown` as Telegram HTML; the result always has balanced, supported tags."""
    tokens = _parser().parse(markdown)
    rendered = _BlockRenderer().render(tokens)
    return _MANY_NEWLINES.sub("\n\n", rendered).strip()


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])


@dataclass(slots=True)
class _List:
    ordered: bool
    next_number: int = 1


@dataclass(slots=True)
class _BlockRenderer:
    out: list[str] = field(default_factory=list)
    lists: list[_List] = field(default_factory=list)
    quote_depth: int = 0
    table: list[list[str]] | None = None

    def render(self, tokens: list[Token]) -> str:
        for token in tokens:
            self._block(token)
        return "".join(self.out)

    def _block(self, token: Token) -> None:
        if self.table is not None and token.type != "table_close":
            self._table_token(token)
            return
        match token.type:
            case "inline":
                self.out.append(render_inline(token.children or []))
            case "paragraph_close":
                self.out.append("\n" if token.hidden else "\n\n")
            case "heading_open":
                self.out.append("<b>")
            case "heading_close":
                self.out.append("</b>\n\n")
            case "bullet_list_open" | "ordered_list_open":
                start = int(str(token.attrs.get("start", 1)))
                self.lists.append(
                    _List(ordered=token.type == "ordered_list_open", next_number=start)
                )
            case "bullet_list_close" | "ordered_list_close":
                self.lists.pop()
                self.out.append("\n" if self.lists else "\n\n")
            case "list_item_open":
                self.out.append(self._bullet())
            case "list_item_close":
                self._end_line()
            case "blockquote_open" | "blockquote_close":
                self._quote(opening=token.type == "blockquote_open")
            case "fence" | "code_block":
                self.out.append(_code_block(token.content, token.info) + "\n\n")
            case "hr":
                self.out.append(_RULE + "\n\n")
            case "table_open":
                self.table = []
            case "table_close":
                self.out.append(_table(self.table or []) + "\n\n")
                self.table = None
            case _:  # paragraph_open, list and table rows: no markup of their own
                pass

    def _quote(self, *, opening: bool) -> None:
        """Telegram's blockquotes cannot be nested: only the outermost one is markup."""
        if opening:
            self.quote_depth += 1
            if self.quote_depth == 1:
                self.out.append("<blockquote>")
            return
        self.quote_depth -= 1
        if self.quote_depth == 0:
            self._trim_trailing_newlines()
            self.out.append("</blockquote>\n\n")

    def _table_token(self, token: Token) -> None:
        assert self.table is not None
        if token.type == "tr_open":
            self.table.append([])
        elif token.type == "inline" and self.table:
            self.table[-1].append(html_to_plain(render_inline(token.children or [])))

    def _bullet(self) -> str:
        current = self.lists[-1]
        indent = "  " * (len(self.lists) - 1)
        if not current.ordered:
            return f"{indent}• "
        number, current.next_number = current.next_number, current.next_number + 1
        return f"{indent}{number}. "

    def _end_line(self) -> None:
        if self.out and not self.out[-1].endswith("\n"):
            self.out.append("\n")

    def _trim_trailing_newlines(self) -> None:
        while self.out and self.out[-1].endswith("\n"):
            self.out[-1] = self.out[-1].rstrip("\n")
            if not self.out[-1]:
                self.out.pop()
            else:
                break


def render_inline(children: list[Token]) -> str:
    """One paragraph's inline tokens as Telegram HTML."""
    out: list[str] = []
    open_tags: list[str] = []
    in_link = False
    for token in children:
        kind = token.type
        if kind == "text":
            out.append(escape_html(token.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind.endswith("_open") and kind[:-5] in _FORMAT_TAGS:
            tag = _FORMAT_TAGS[kind[:-5]]
            open_tags.append(tag)
            out.append(f"<{tag}>")
        elif kind.endswith("_close") and kind[:-6] in _FORMAT_TAGS and open_tags:
            out.append(f"</{open_tags.pop()}>")
        elif kind == "code_inline":
            out.append(_inline_code(token.content, open_tags, in_link=in_link))
        elif kind == "link_open":
            href = str(token.attrs.get("href", ""))
            in_link = href.startswith(_LINK_SCHEMES)
            if in_link:
                out.append(f'<a href="{escape_html(href, quote=True)}">')
        elif kind == "link_close":
            if in_link:
                out.append("</a>")
            in_link = False
        elif kind == "image":
            out.append(escape_html(token.content or str(token.attrs.get("src", ""))))
    out.extend(f"</{tag}>" for tag in reversed(open_tags))  # unbalanced input stays valid
    return "".join(out)


def _inline_code(code: str, open_tags: list[str], *, in_link: bool) -> str:
    """`<code>` closes the formatting around it and reopens it after; inside a link, where no
    entity may nest, the code stays plain text."""
    if in_link:
        return escape_html(code)
    closing = "".join(f"</{tag}>" for tag in reversed(open_tags))
    reopening = "".join(f"<{tag}>" for tag in open_tags)
    return f"{closing}<code>{escape_html(code)}</code>{reopening}"


def _code_block(content: str, info: str) -> str:
    language = info.strip().split(maxsplit=1)[0] if info.strip() else ""
    body = escape_html(content.rstrip("\n"))
    if language and _LANGUAGE.match(language):
        return f'<pre><code class="language-{language}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _table(rows: list[list[str]]) -> str:
    """A markdown table as a fixed-width grid (Telegram has no tables)."""
    if not rows:
        return ""
    columns = max(len(r) for r in rows)
    widths = [max((len(r[i]) for r in rows if i < len(r)), default=0) for i in range(columns)]
    lines = [
        " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    if len(lines) > 1:
        lines.insert(1, "-+-".join("-" * w for w in widths))
    return f"<pre>{escape_html(chr(10).join(lines))}</pre>"
