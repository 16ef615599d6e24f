"""`ScrollingReply`: a streamed reply cut into rows printed once and a live tail, with rich's own
markdown rendering (the one the terminal chat uses): streamed in any pieces, the printed rows
are exactly the rows of the whole reply rendered at once."""

from __future__ import annotations

import re

import pytest
from rich.console import Console
from rich.markdown import Markdown

from gateway.platforms.terminal_render import chat_markdown
from gateway.platforms.terminal_stream import Row, ScrollingReply, settled_length

DOC = """Here is the plan, in a few steps:

1. First, read the file and see how long it is, and then decide what to do with it.
2. Second
   - nested item
   - another nested
3. Third

## A heading

Some **bold** and `code` and a [link](http://x.y).
A second line in the same paragraph.

```python
def f(x):
    return x + 1
```

> a quote
> more quote

| col a | col b |
|---|---|
| 1 | 2 |
| 333333 | 4 |

Final words.
"""


def render(markdown: str, width: int) -> list[Row]:
    console = Console(width=width, force_terminal=True, color_system="truecolor")
    return console.render_lines(Markdown(chat_markdown(markdown)), console.options, pad=False)


def text(rows: list[Row]) -> list[str]:
    return ["".join(segment.text for segment in row).rstrip() for row in rows]


def stream(reply: ScrollingReply, source: str, *, step: int, width: int) -> list[Row]:
    printed: list[Row] = []
    pieces = re.findall(r"\s*\S+\s*", source)
    for i in range(0, len(pieces), step):
        reply.add("".join(pieces[i : i + step]))
        printed += reply.settle(width)
        assert len(reply.tail(width, 4)) <= 4
    return printed


@pytest.mark.parametrize("step", [1, 2, 5, 13, 1000])
def test_streamed_in_any_pieces_the_printed_rows_are_the_whole_reply(step: int) -> None:
    reply = ScrollingReply(render)
    printed = stream(reply, DOC, step=step, width=50)
    assert printed, "nothing scrolled before the end"
    printed += reply.finish(DOC.rstrip(), 50)
    assert text(printed) == text(render(DOC, 50))


def test_rows_settle_as_lines_complete_and_the_tail_holds_the_rest() -> None:
    reply = ScrollingReply(render)
    reply.add("one\ntwo\nthr")
    assert text(reply.settle(40)) == ["one"]  # "two" is held (a block's last row may move)
    assert text(reply.tail(40, 10)) == ["two", "thr"]
    assert text(reply.tail(40, 1)) == ["thr"]  # the newest rows when the screen is short
    reply.add("ee\n")
    assert text(reply.settle(40)) == ["two"]
    assert text(reply.finish("one\ntwo\nthree", 40)) == ["three"]


def test_a_growing_table_and_an_empty_fence_are_not_settled() -> None:
    table = "text\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert settled_length(table) == len("text\n")
    assert settled_length("text\n```py\n") == len("text\n")
    assert settled_length("text\n```py\nx = 1\n") == len("text\n```py\nx = 1\n")
    assert settled_length("no newline yet") == 0


def test_a_narrower_window_closes_the_segment_and_loses_nothing() -> None:
    """Rows already printed keep their width; the rest is drawn at the new one, a code block
    reopened, and every line of the reply is printed once."""
    source = "intro line\n```\n" + "".join(f"code {n}\n" for n in range(6)) + "```\nend line\n"
    reply = ScrollingReply(render)
    half = source.index("code 3")
    reply.add(source[:half])
    printed = reply.settle(60)
    reply.add(source[half:])
    narrowed = reply.settle(30)  # the rows drawn for 60 columns, less their padding
    assert narrowed and all(sum(s.cell_length for s in row) <= 30 for row in narrowed)
    printed += narrowed
    printed += reply.finish(source.rstrip(), 30)
    words = [line.strip() for line in text(printed) if line.strip()]
    assert words == ["intro line", *(f"code {n}" for n in range(6)), "end line"]
    assert max(len(line) for line in text(printed)[-3:]) <= 30


def test_a_line_printed_above_ends_the_call_and_the_answer_is_the_last_calls_text() -> None:
    """Text before a tool call stays printed above it; the turn's answer is what the last
    model call streamed, so only its rest is printed."""
    reply = ScrollingReply(render)
    reply.add("let me look")
    assert text(reply.close()) == ["let me look"]
    assert reply.pending == ""
    reply.add("found it\nin two ")
    reply.settle(40)
    rest = reply.finish("found it\nin two lines", 40)
    assert text(rest) == ["found it", "in two lines"]


def test_an_answer_that_is_not_what_streamed_is_shown_whole_after_it() -> None:
    reply = ScrollingReply(render)
    reply.add("partial te")
    rows = reply.finish("⚠️ The model failed; try again.", 40)
    assert text(rows) == ["partial te", "⚠️ The model failed; try again."]
    assert text(ScrollingReply(render).finish("Started a new session.", 40)) == [
        "Started a new session."
    ]
