"""The real `hermes chat` in a pseudo-terminal: a long reply scrolls while it streams, and the
status line follows the session.

The fake model streams a 120-line reply and holds back its end (`Turn.stall_after_events` with
`release`): while it waits, the screen (pyte, a terminal emulator fed the program's bytes) must
already show the newest lines, with the first ones scrolled off into the terminal's history,
as Claude Code and Codex do; once released, every line is there exactly once, in order. A
resize or Esc mid-stream loses and repeats nothing. The Anthropic stream sends
`message_start`, `ping` and `content_block_start` before the first
`content_block_delta`
(docs.anthropic.com/en/docs/build-with-claude/streaming), and the fake sends one delta per word.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from agent.turn import INTERRUPTED_MARK
from gateway.platforms.terminal import PROMPT
from gateway.platforms.terminal_render import INTERRUPTED_NOTE
from sim.llm_server import FakeLLM, Turn
from tests.integration.pty_terminal import CTRL_D, ESC, ROWS, HermesTerminal
from tests.integration.test_chat_cli import write_config
from tests.integration.test_terminal_chat_pty import _resumed_id, _stored

pytestmark = pytest.mark.timeout(120)

READY = PROMPT.rstrip()
LINES = [f"line {n:03d} of the long reply" for n in range(120)]
HELD_AFTER = 100
"""The fake sends the first 100 lines, then waits to be released."""
HEAD_EVENTS = 3
"""`message_start`, `ping`, `content_block_start`."""
WORDS_PER_LINE = 6
"""`line`, `000`, `of`, `the`, `long`, `reply\\n`: one delta each."""


def _held_turn(release: threading.Event | None = None) -> Turn:
    return Turn(
        text="\n".join(LINES),
        stall_after_events=HEAD_EVENTS + WORDS_PER_LINE * HELD_AFTER,
        release=release,
    )


def _numbers(rows: list[str]) -> list[int]:
    return [int(n) for row in rows for n in re.findall(r"^line (\d{3}) of the long reply$", row)]


def _prompts(screen: str) -> int:
    return sum(1 for line in screen.splitlines() if line.startswith(READY))


def test_a_long_reply_scrolls_while_it_streams(threaded_llm: FakeLLM, hermes_home: Path) -> None:
    """Mid-stream, with the rest held back: lines from the start have scrolled off into the
    history, the newest line that arrived is on screen, none is shown twice; released, the
    whole reply is there once, in order, and the prompt comes back under it."""
    write_config(hermes_home, threaded_llm, "anthropic")
    release = threading.Event()
    threaded_llm.script(_held_turn(release))
    with HermesTerminal(hermes_home, "chat") as term:
        term.wait_for(READY)
        term.enter("tell me a long one")
        term.wait_for(LINES[HELD_AFTER - 1])
        history, display = _numbers(term.history()), _numbers(term.display())
        release.set()
        term.wait_for(lambda s: _prompts(s) == 2)
        final = _numbers(term.text().splitlines())
        term.type(CTRL_D)
        assert term.wait_exit() == 0
    assert history[:3] == [0, 1, 2], history  # the start scrolled off, into the history
    assert HELD_AFTER - 1 in display and 0 not in display
    assert len(display) > ROWS // 2  # the screen is full of the reply, not a clipped region
    assert history + display == list(range(HELD_AFTER))  # each once, in order, none missing
    assert final == list(range(len(LINES)))


def test_resize_and_esc_mid_stream_keep_every_line_once(
    threaded_llm: FakeLLM, hermes_home: Path
) -> None:
    """The window narrows while the reply streams, then Esc stops it: what arrived stays on
    screen and in the history, each line once and in order, marked interrupted; the stored
    reply is cut where it stopped."""
    write_config(hermes_home, threaded_llm, "anthropic")
    threaded_llm.script(_held_turn(), Turn(text="short answer"))
    with HermesTerminal(hermes_home, "chat") as term:
        term.wait_for(READY)
        term.enter("tell me a long one")
        term.wait_for(LINES[40])
        term.resize(ROWS, 100)  # narrower (pyte drops rows it loses, a terminal would not)
        term.wait_for(LINES[HELD_AFTER - 1])
        term.type(ESC)
        term.wait_for(INTERRUPTED_NOTE)
        term.wait_for(lambda s: _prompts(s) == 2)
        shown = _numbers(term.text().splitlines())
        term.enter("and now?")
        term.wait_for("short answer")
        term.type(CTRL_D)
        assert term.wait_exit() == 0
        session_id = _resumed_id(term.text())
    assert shown == list(range(HELD_AFTER))
    cut = _stored(hermes_home, session_id)[2]
    assert str(cut["content"]).endswith(INTERRUPTED_MARK)
    assert LINES[HELD_AFTER - 1] in cut["content"] and LINES[HELD_AFTER] not in cut["content"]


def _toolbar(term: HermesTerminal) -> str:
    return term.display()[-1]


def test_status_line_is_filled_at_start_and_follows_new_and_resume(
    threaded_llm: FakeLLM, hermes_home: Path
) -> None:
    """Before the first message the toolbar names the model and says the session is new;
    after a reply it shows that session's id and size; `/new` shows the new session (not the
    old id or its tokens), `/resume` the old one again."""
    write_config(hermes_home, threaded_llm, "anthropic")
    with HermesTerminal(hermes_home, "chat", answer_cpr=True) as term:
        term.wait_for(lambda s: "new session · window 128K" in _toolbar(term))
        term.enter("tell me about this " * 200)
        term.wait_for("echo: tell me about this")
        first = _toolbar_session(term)
        talked = _tokens(_toolbar(term))
        term.enter("/new")
        screen = term.wait_for("Started a new session (")
        second = re.findall(r"Started a new session \((\S+)\)", screen)[-1]
        term.wait_for(lambda s: _toolbar(term).endswith(second))
        fresh = _tokens(_toolbar(term))
        term.enter(f"/resume {first}")
        term.wait_for(lambda s: _toolbar(term).endswith(first))
        resumed = _tokens(_toolbar(term))
        term.type(CTRL_D)
        assert term.wait_exit() == 0
    assert first != second
    assert fresh + 800 < talked <= resumed  # the message alone is ~950 tokens


def _toolbar_session(term: HermesTerminal) -> str:
    """The session id at the end of the toolbar once a reply has come back."""
    term.wait_for(lambda s: " tokens · " in _toolbar(term))
    return _toolbar(term).rsplit(" · ", 1)[-1]


def _tokens(toolbar: str) -> int:
    return int(toolbar.split(" · ")[1].split()[0].replace(",", ""))
