"""How long the terminal chat spends drawing a long streamed reply, per redraw: JSON on stdout.

A reply that scrolls while it streams (`gateway.platforms.terminal_stream.ScrollingReply`) is
rendered again at every redraw, and rich's markdown rendering grows faster than the text; the
segments it splits into keep each redraw to the newest rows. Measured in one run against the
floor of the same code with splitting off (the whole reply rendered at every redraw). Every
redraw happens on the chat's event loop, so its time is time Esc waits for.

Usage: python scripts/bench_terminal_stream.py [--lines 300] [--words-per-redraw 40]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.markdown import Markdown  # noqa: E402

from gateway.platforms import terminal_stream  # noqa: E402
from gateway.platforms.terminal_render import chat_markdown  # noqa: E402
from gateway.platforms.terminal_stream import Row, ScrollingReply  # noqa: E402

WIDTH, HEIGHT = 100, 40
CONSOLE = Console(width=WIDTH, force_terminal=True, color_system="truecolor")


def render(markdown: str, width: int) -> list[Row]:
    options = CONSOLE.options.update_width(width)
    return CONSOLE.render_lines(Markdown(chat_markdown(markdown)), options, pad=False)


def replies(lines: int) -> dict[str, str]:
    return {
        "lines": "\n".join(
            f"line {i} of **the** long reply, with a few words" for i in range(lines)
        ),
        "paragraphs": "\n\n".join(
            f"paragraph {i}: a short one, *said* plainly" for i in range(lines)
        ),
        "code": "```python\n"
        + "\n".join(f"x_{i} = {i} * 2  # a comment" for i in range(lines))
        + "\n```\n",
    }


def redraws(text: str, words: int) -> tuple[list[float], bool]:
    """Stream `text` `words` at a time, one redraw each (settle + tail, as `TerminalSink` does);
    the redraw times, and whether the printed rows are exactly the whole reply's."""
    reply, printed, spent = ScrollingReply(render), [], []
    pieces = re.findall(r"\s*\S+\s*", text)
    for i in range(0, len(pieces), words):
        reply.add("".join(pieces[i : i + words]))
        started = time.perf_counter()
        printed += reply.settle(WIDTH)
        reply.tail(WIDTH, HEIGHT)
        spent.append(time.perf_counter() - started)
    printed += reply.finish(text.rstrip(), WIDTH)
    return spent, printed == render(text, WIDTH)


def summary(spent: list[float]) -> dict[str, float]:
    ordered = sorted(spent)
    return {
        "redraws": len(spent),
        "median_ms": round(1000 * statistics.median(spent), 1),
        "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1),
        "max_ms": round(1000 * ordered[-1], 1),
        "total_s": round(sum(spent), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--words-per-redraw", type=int, default=40)
    args = parser.parse_args()
    results: dict[str, object] = {}
    for kind, text in replies(args.lines).items():
        split, exact = redraws(text, args.words_per_redraw)
        kept = terminal_stream.SPLIT_ROWS
        terminal_stream.SPLIT_ROWS = 10**9  # the floor: the whole reply at every redraw
        try:
            whole, _ = redraws(text, args.words_per_redraw)
        finally:
            terminal_stream.SPLIT_ROWS = kept
        results[kind] = {
            "segments": summary(split),
            "whole_reply_floor": summary(whole),
            "printed_rows_equal_whole_render": exact,
        }
    print(
        json.dumps(
            {
                "assumptions": {
                    "lines": args.lines,
                    "words_per_redraw": args.words_per_redraw,
                    "width": WIDTH,
                    "live_rows": HEIGHT,
                    "note": "one process, rich markdown as the chat renders it; no terminal I/O",
                },
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
