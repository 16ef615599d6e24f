"""Split a reply into messages a platform accepts: pure, on paragraph, then line, then word bounds.

Three flavours, one rule for where to cut (a blank line wins over a line break, a line break over
a space, and no cut lands in the first quarter of a piece):

- `split_for_limit`: plain text.
- `split_markdown`: markdown as Discord renders it; a cut never falls inside a fenced code block
  unless the block alone is longer than a message, and then the fence is closed at the cut and
  reopened, with its language, at the top of the next message.
- `split_html`: Telegram HTML; a cut never falls inside a tag or an entity (`&amp;`), and the
  tags open at a cut are closed there and reopened in the next message, so every message is
  well formed on its own (a long `<pre><code class="language-py">` stays code in each one).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

__all__ = ["split_for_limit", "split_html", "split_markdown"]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_ATOM = re.compile(r"<[^<>]*>|&#?[A-Za-z0-9]{1,32};|\n| |[^<&\n ]{1,64}|[<&]")
"""Tags, entities, whitespace and short runs of text: what a cut may fall between."""
_TAG_NAME = re.compile(r"^</?\s*([A-Za-z][A-Za-z0-9-]*)")
_EMPTY_PAIR = re.compile(r"<(b|i|s|u|a|code|tg-spoiler)(?:\s[^>]*)?></\1>")
_MIN_HTML_LIMIT = 64


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


def split_markdown(text: str, *, limit: int) -> list[str]:
    """Like `split_for_limit`, but fenced code blocks stay whole where they fit in one message,
    and are closed and reopened around a cut where they do not."""
    if limit < 16:
        raise ValueError("limit must be at least 16 to hold a reopened code fence")
    text = text.strip()
    pieces: list[str] = []
    while len(text) > limit:
        fences = _fence_spans(text)
        cut = _best_cut(text, limit, avoid=fences)
        inside = next(((s, e, o) for s, e, o in fences if s < cut < e), None)
        if inside is None:
            pieces.append(text[:cut].rstrip())
            text = text[cut:].lstrip()
            continue
        start, end, opener = inside
        closer = opener.strip()[0] * 3
        if len(opener) > limit // 4:  # a huge info string: reopen with the bare marker
            opener = closer
        cut = _cut_in_code(text, (start, end), limit - len(closer) - 1)
        pieces.append(text[:cut].rstrip("\n") + "\n" + closer)
        text = opener + "\n" + text[cut:].lstrip("\n")
    if text.strip():
        pieces.append(text)
    return [p for p in pieces if p.strip()]


def split_html(text: str, *, limit: int) -> list[str]:
    """Cut Telegram HTML into well-formed pieces of at most `limit` characters each."""
    if limit < _MIN_HTML_LIMIT:
        raise ValueError(f"limit must be at least {_MIN_HTML_LIMIT} to hold reopened tags")
    atoms = _ATOM.findall(text.strip())
    pieces: list[str] = []
    stack: list[tuple[str, str]] = []  # (name, opening tag) of the tags open here
    i = 0
    while i < len(atoms):
        if not _in_pre(stack):
            while i < len(atoms) and atoms[i] in (" ", "\n"):
                i += 1
        if i >= len(atoms):
            break
        taken = _take(atoms, i, stack, limit)
        if taken is None:  # markup alone (a huge link) outgrows a message: the rest goes plain
            pieces += _as_plain("".join(atoms[i:]), limit)
            break
        end, end_stack = taken
        head = "".join(tag for _, tag in stack)
        body = "".join(atoms[i:end])
        piece = _EMPTY_PAIR.sub("", head + body.rstrip(" \n") + _closers(end_stack))
        if _has_text(piece):
            pieces.append(piece)
        if end < len(atoms) and atoms[end] in (" ", "\n"):
            end += 1  # the separator the cut fell on
        i, stack = end, end_stack
    return pieces


def _best_cut(text: str, limit: int, avoid: Sequence[tuple[int, int, str]] = ()) -> int:
    window = text[: limit + 1]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep, 0, limit + 1)
        while at > limit // 4:  # a boundary too early would leave a tiny piece
            cut = at if sep == " " else at + len(sep)
            if not any(s < cut < e for s, e, _ in avoid):
                return cut
            at = window.rfind(sep, 0, at)
    return limit


def _fence_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, opening line) of each fenced code block; an unclosed one runs to the end."""
    spans: list[tuple[int, int, str]] = []
    opened: tuple[int, str, str] | None = None  # start, marker, opening line
    offset = 0
    for line in text.splitlines(keepends=True):
        match = _FENCE.match(line.rstrip("\n"))
        if opened is None and match:
            opened = (offset, match.group(1), line.rstrip("\n"))
        elif opened is not None and match and _closes(match, opened[1]):
            spans.append((opened[0], offset + len(line.rstrip("\n")), opened[2]))
            opened = None
        offset += len(line)
    if opened is not None:
        spans.append((opened[0], len(text), opened[2]))
    return spans


def _closes(match: re.Match[str], marker: str) -> bool:
    found = match.group(1)
    return found[0] == marker[0] and len(found) >= len(marker) and not match.group(2).strip()


def _cut_in_code(text: str, block: tuple[int, int], room: int) -> int:
    """A line break inside the code block to cut at, at most `room` characters in: after its
    opening line, before its closing one (so neither half is an empty block)."""
    start, end = block
    first_line_end = text.find("\n", start)
    closing_line = text.rfind("\n", start, end) if end < len(text) else len(text)
    at = text.rfind("\n", first_line_end + 1, min(room + 1, closing_line))
    if at > room // 4:
        return at
    return max(room, first_line_end + 1)


def _take(
    atoms: list[str], start: int, stack: list[tuple[str, str]], limit: int
) -> tuple[int, list[tuple[str, str]]] | None:
    """How far one piece reaches from `start`: (end index, tags open there); None when not
    even one more atom fits beside the open tags."""
    size = sum(len(tag) for _, tag in stack)
    current = list(stack)
    cuts: list[tuple[int, int, list[tuple[str, str]]]] = []  # priority, index, tags open
    j = start
    while j < len(atoms):
        atom = atoms[j]
        after = _apply(current, atom)
        if size + len(atom) + _closers_len(after) > limit:
            break
        if atom in (" ", "\n") and j > start:
            priority = 3 if atom == "\n" and atoms[j - 1] == "\n" else 2 if atom == "\n" else 1
            cuts.append((priority, j, list(current)))
        size += len(atom)
        current = after
        j += 1
    if j == len(atoms):
        return j, current
    if j == start:
        return None
    floor = start + (j - start) // 4
    usable = [c for c in cuts if c[1] > floor]
    if not usable:
        return j, current  # no boundary late enough: a hard cut between two atoms
    best = max(usable, key=lambda c: (c[0], c[1]))
    return best[1], best[2]


def _as_plain(markup: str, limit: int) -> list[str]:
    """`markup` without its tags, escaped, in pieces that stay within `limit` once escaped."""
    text = html.unescape(re.sub(r"<[^<>]*>", "", markup))
    pieces: list[str] = []
    for piece in split_for_limit(text, limit=limit):
        escaped = html.escape(piece, quote=False)
        if len(escaped) > limit:  # worst case every character becomes "&amp;"
            pieces += [
                html.escape(p, quote=False) for p in split_for_limit(piece, limit=limit // 5)
            ]
        else:
            pieces.append(escaped)
    return pieces


def _apply(stack: list[tuple[str, str]], atom: str) -> list[tuple[str, str]]:
    if not atom.startswith("<") or len(atom) < 3:
        return stack
    match = _TAG_NAME.match(atom)
    if match is None:
        return stack
    name = match.group(1).lower()
    if atom.startswith("</"):
        return stack[:-1] if stack and stack[-1][0] == name else stack
    return [*stack, (name, atom)]


def _closers(stack: list[tuple[str, str]]) -> str:
    return "".join(f"</{name}>" for name, _ in reversed(stack))


def _closers_len(stack: list[tuple[str, str]]) -> int:
    return sum(len(name) + 3 for name, _ in stack)


def _in_pre(stack: list[tuple[str, str]]) -> bool:
    return any(name in ("pre", "code") for name, _ in stack)


def _has_text(piece: str) -> bool:
    return bool(re.sub(r"<[^<>]*>", "", piece).strip())
