"""A streamed reply that scrolls: settled lines go into the terminal's scrollback once, as they
arrive, and only the newest lines stay in a small live region at the bottom of the screen.

A live region cannot grow past the screen (what scrolled off can no longer be redrawn), so the
reply is cut, as it streams, into rows that can no longer change and a tail that still can. The
rows of the markdown up to the last newline are settled, less `HOLD_ROWS` at its end (a code
block's bottom padding), a code fence opened with no line in it yet and a table still growing
(its columns widen with each row). Settled rows are printed once, above the live region, and
the terminal scrolls them into its history; the tail is redrawn in place, cut to its newest rows
so it always fits the screen.

Printing rows keeps their width: a resized terminal, or a line printed above the reply (a tool
call), closes the current *segment* (every row of it printed) and starts a new one, rendered at
the new width; a segment that starts inside a code fence reopens it. `ScrollingReply` decides
all of this from text and a `render` function (pure; tested without a terminal);
`terminal_render.TerminalSink` prints what it returns.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment

__all__ = ["HOLD_ROWS", "Row", "ScrollingReply", "settled_length"]

Row = list[Segment]
Render = Callable[[str, int], list[Row]]
"""Markdown source and a width → the rows it renders to."""

HOLD_ROWS = 1
"""Rows at the end of the settled markdown kept in the live region: a code block's bottom
padding is drawn before the block's next line arrives."""
SPLIT_ROWS = 24
"""Once this many more rows of a segment are printed, it is split where that changes nothing,
so each redraw renders the newest part only (rendering grows faster than the text)."""


def _fence(line: str) -> bool:
    return line.lstrip().startswith("```")


def _is_table_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def settled_length(text: str) -> int:
    """Pure: how much of streamed markdown `text` renders the same whatever follows: up to its
    last newline, less a table still growing and a code fence with no line in it yet."""
    end = text.rfind("\n") + 1
    lines = text[:end].split("\n")[:-1]
    cut = len(lines)
    while cut > 0 and _is_table_row(lines[cut - 1]):
        cut -= 1
    if cut > 0 and _fence(lines[cut - 1]) and fence_opener("\n".join(lines[:cut]) + "\n"):
        cut -= 1  # an opened fence, nothing in it yet: its padding rows are still moving
    return sum(len(line) + 1 for line in lines[:cut])


def fence_opener(text: str) -> str:
    """Pure: the line that opened the code fence `text` ends inside ("" when it ends outside)."""
    opener = ""
    for line in text.split("\n"):
        if _fence(line):
            opener = "" if opener else line.strip()
    return opener


class ScrollingReply:
    """One streamed reply cut into printed rows and a live tail; the caller prints the rows
    each method returns, in order, above the live region."""

    def __init__(self, render: Render) -> None:
        self._render = render
        self._text = ""
        self._call = 0
        """Where the current model call's text begins in `_text` (a line printed above, such
        as a tool call, ends a call's text)."""
        self._start = 0
        """Where the current segment begins in `_text`."""
        self._opener = ""
        """The code fence the current segment reopens ("" when it starts outside one)."""
        self._printed = 0
        """Rows of the current segment's rendering already printed."""
        self._width: int | None = None
        self._next_split = SPLIT_ROWS
        self._settled: tuple[str, int, list[Row]] | None = None
        """The last settled source, its width and its rows (most redraws add to one line)."""

    def add(self, text: str) -> None:
        self._text += text

    @property
    def text(self) -> str:
        """Everything that streamed."""
        return self._text

    @property
    def pending(self) -> str:
        """What the current model call streamed so far."""
        return self._text[self._call :]

    def settle(self, width: int) -> list[Row]:
        """The rows that settled since the last call; a new width first closes the segment
        where it had settled (its rows at the width they were drawn at)."""
        rows: list[Row] = []
        segment = self._text[self._start :]
        if self._width is not None and width != self._width:
            upto = settled_length(segment)
            rows = [_fit(row, width) for row in self._rows(segment[:upto], self._width)]
            self._restart(self._start + upto, fence_opener(self._source(segment[:upto])))
        self._width = width
        segment = self._text[self._start :]
        settled = segment[: settled_length(segment)]
        if self._settled is None or self._settled[:2] != (settled, width):
            self._settled = (settled, width, self._render_source(settled, width))
        rendered = self._settled[2]
        ready = max(len(rendered) - HOLD_ROWS, self._printed)
        rows += rendered[self._printed : ready]
        self._printed = ready
        if self._printed >= self._next_split:
            self._next_split = self._printed + SPLIT_ROWS
            self._split(settled, rendered, width)
        return rows

    def tail(self, width: int, height: int) -> list[Row]:
        """The live region: the segment's rows not printed yet, its newest `height` at most."""
        rows = self._render_source(self._text[self._start :], width)[self._printed :]
        return rows[-height:] if height > 0 else []

    def close(self) -> list[Row]:
        """Before a line is printed above the reply (a tool call, a notice): every row not
        printed yet; the next text is a new model call's, in a new segment."""
        rows = self._rows(self._text[self._start :], self._width or 80)
        self._call = len(self._text)
        self._restart(len(self._text), "")
        return rows

    def finish(self, final: str, width: int) -> list[Row]:
        """The rest of the reply once the turn is done. `final` is its answer: the last model
        call's text when that streamed (only its rest is printed), else shown whole (a command's
        answer, a failure)."""
        said = self._text[self._call :]
        if said.strip() and final.startswith(said.rstrip()):
            self._text = self._text[: self._call] + final
            self._start = min(self._start, len(self._text))
            rows = self.settle(width)
            return rows + self.close()
        rows = self.close()
        return rows + (self._render(final, width) if final.strip() else [])

    def _split(self, settled: str, rendered: list[Row], width: int) -> None:
        """Start the segment later, at a line of `settled` (rendered as `rendered`) where its
        two halves render as the whole does: a blank row between them aside, and a code
        block's padding where the cut is inside one (its bottom row in the first half, its
        top row reopened in the second)."""
        lines = settled.split("\n")[:-1]
        for cut in sorted({len(lines) - 2, len(lines) * 3 // 4, len(lines) // 2}, reverse=True):
            upto = sum(len(line) + 1 for line in lines[: max(cut, 0)])
            if cut <= 0 or not settled[:upto].strip() or not settled[upto:].strip():
                continue
            head = self._render_source(settled[:upto], width)
            opener = fence_opener(self._source(settled[:upto]))
            rest = self._render(f"{opener}\n{settled[upto:]}" if opener else settled[upto:], width)
            for drop in (0, 1) if opener else (0,):  # padding rows, when cut inside a fence
                shown = len(head) - drop
                gap = len(rendered) - shown - (len(rest) - drop)
                if (
                    gap >= 0
                    and shown + gap <= self._printed
                    and rendered[:shown] == head[:shown]
                    and rendered[shown + gap :] == rest[drop:]
                    and _blank([*head[shown:], *rendered[shown : shown + gap], *rest[:drop]])
                ):
                    self._printed -= shown + gap - drop
                    self._next_split = self._printed + SPLIT_ROWS
                    self._start, self._opener = self._start + upto, opener
                    self._settled = None
                    return

    def _rows(self, segment: str, width: int) -> list[Row]:
        return self._render_source(segment, width)[self._printed :]

    def _render_source(self, segment: str, width: int) -> list[Row]:
        if not segment.strip():
            return []
        return self._render(f"{self._opener}\n{segment}" if self._opener else segment, width)

    def _source(self, segment: str) -> str:
        return f"{self._opener}\n{segment}" if self._opener else segment

    def _restart(self, start: int, opener: str) -> None:
        self._start, self._opener, self._printed = start, opener, 0
        self._next_split = SPLIT_ROWS
        self._settled = None


def _blank(rows: list[Row]) -> bool:
    """No row shows text (empty rows and padding only)."""
    return not any(segment.text.strip() for row in rows for segment in row)


def _fit(row: Row, width: int) -> Row:
    """`row`, drawn for a wider window, without the trailing blanks (a code block's padding
    included) that would wrap it onto a second row of a narrower one; text is never cut."""
    fitted = list(row)
    while fitted and sum(segment.cell_length for segment in fitted) > width:
        last = fitted[-1]
        if last.control or last.text.strip(" "):
            stripped = last.text.rstrip(" ")
            if stripped == last.text:
                break
            room = max(width - sum(s.cell_length for s in fitted[:-1]), len(stripped))
            fitted[-1] = Segment(last.text[:room], last.style)
            break
        fitted.pop()
    return fitted
