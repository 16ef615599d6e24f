"""The real `hermes chat` in a pseudo-terminal against the fake model: keys in, screen read back.

What a person does: stop a slow reply with Ctrl-C or Esc and go on; leave with Ctrl-C twice;
`/new`, leave, come back to a new session and `-c` to the newest; `/sessions`; Alt-Enter for a
second line. The stored transcript must stay well-formed: user and assistant turns alternate
(Anthropic Messages API, docs.anthropic.com/en/api/messages: "consecutive user or assistant
turns" are combined or refused, so we never send them).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.turn import INTERRUPTED_MARK
from gateway.platforms.terminal import EXIT_HINT, PROMPT
from gateway.platforms.terminal_keys import SHIFT_ENTER_SEQUENCES
from gateway.platforms.terminal_render import INTERRUPTED_NOTE
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from state import SqlSessionStore
from tests.integration.pty_terminal import ALT_ENTER, CTRL_C, CTRL_D, ESC, HermesTerminal
from tests.integration.test_chat_cli import write_config

pytestmark = pytest.mark.timeout(90)

SLOW = " ".join(f"word{n}" for n in range(80))
READY = PROMPT.rstrip()
RESUME = re.compile(r"resume with: hermes chat --resume (\S+)")


def _stored(home: Path, session_id: str) -> list[dict[str, Any]]:
    async def load() -> list[dict[str, Any]]:
        store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{home / 'state.db'}")
        try:
            return [dict(m) for m in await store.transcript.load_active(session_id)]
        finally:
            await store.aclose()

    return asyncio.run(load())


def _prompts(screen: str) -> int:
    return sum(1 for line in screen.splitlines() if line.startswith(PROMPT.strip()))


def _resumed_id(screen: str) -> str:
    found = RESUME.findall(screen)
    assert found, f"no resume hint on screen:\n{screen}"
    return str(found[-1])


def test_ctrl_c_and_esc_stop_a_slow_reply_and_the_chat_goes_on(
    threaded_llm: FakeLLM, hermes_home: Path
) -> None:
    """Ctrl-C mid-stream (then Esc on another slow reply) returns to the prompt keeping what
    arrived; the next turn works; Ctrl-C on the empty prompt asks for a second press, which
    leaves with the resume command; the store holds an alternating transcript."""
    write_config(hermes_home, threaded_llm, "anthropic")
    threaded_llm.script(
        Turn(text=SLOW, event_delay_s=0.05),
        Turn(text=SLOW, event_delay_s=0.05),
        Turn(text="all good now"),
    )
    with HermesTerminal(hermes_home, "chat") as term:
        term.wait_for(READY)
        term.enter("tell me a long story")
        term.wait_for("word3 ")
        term.type(CTRL_C)
        term.wait_for(INTERRUPTED_NOTE)
        term.wait_for(lambda s: _prompts(s) == 2)
        term.enter("another one")
        term.wait_for(lambda s: s.count("word3 ") == 2)
        term.type(ESC)
        term.wait_for(lambda s: s.count(INTERRUPTED_NOTE) == 2)
        term.enter("and now?")
        term.wait_for("all good now")
        term.wait_for(lambda s: _prompts(s) == 4)
        term.type(CTRL_C)
        term.wait_for(EXIT_HINT)
        term.type(CTRL_C)
        assert term.wait_exit() == 0
        screen = term.text()
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen
    session_id = _resumed_id(screen)
    stored = _stored(hermes_home, session_id)
    roles = [m["role"] for m in stored]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    for cut in (stored[2], stored[4]):
        assert str(cut["content"]).startswith("word0 word1 word2")
        assert str(cut["content"]).endswith(INTERRUPTED_MARK) and "word79" not in cut["content"]
    sent = threaded_llm.requests[-1].json
    assert sent is not None
    sent_roles = [m["role"] for m in sent["messages"]]
    assert all(a != b for a, b in zip(sent_roles, sent_roles[1:], strict=False))


def test_new_then_restart_starts_fresh_and_continue_takes_the_newest(
    threaded_llm: FakeLLM, hermes_home: Path
) -> None:
    """`/new` switches sessions and `/sessions` lists both; a restarted `hermes chat` is a
    new session (none of the old words sent); `hermes chat -c` resumes the newest, showing it."""
    write_config(hermes_home, threaded_llm, "anthropic")
    with HermesTerminal(hermes_home, "chat") as term:
        term.wait_for(READY)
        term.enter("first chat")
        term.wait_for("echo: first chat")
        first = _stored_ids(hermes_home)[0]
        term.enter("/new")
        screen = term.wait_for("Started a new session (")
        second = re.findall(r"Started a new session \((\S+)\)", screen)[0]
        term.enter("second chat")
        term.wait_for("echo: second chat")
        term.enter("/sessions")
        screen = term.wait_for(lambda s: first in s and s.count(second) >= 2)
        term.type(CTRL_D)
        assert term.wait_exit() == 0
        assert _resumed_id(term.text()) == second
    listing = screen[screen.rindex("Sessions of this chat") :]
    assert f"→ {second}" in listing and first in listing
    with HermesTerminal(hermes_home, "chat") as term:
        term.wait_for(READY)
        term.enter("third chat")
        term.wait_for("echo: third chat")
        term.type(CTRL_D)
        assert term.wait_exit() == 0
        third = _resumed_id(term.text())
    assert third not in (first, second)
    texts = str(threaded_llm.requests[-1].json)
    assert "first chat" not in texts and "second chat" not in texts
    with HermesTerminal(hermes_home, "chat", "-c") as term:
        term.wait_for(f"Resumed session {third}")
        term.wait_for("you › third chat")  # the last exchanges are shown
        term.wait_for(READY)
        term.enter("still here?")
        term.wait_for("echo: still here?")
        term.type(CTRL_D)
        assert term.wait_exit() == 0
    assert "third chat" in str(threaded_llm.requests[-1].json)


def test_alt_enter_makes_a_two_line_message(threaded_llm: FakeLLM, hermes_home: Path) -> None:
    """Alt-Enter (and Shift-Enter in the CSI-u form kitty and foot send) insert a newline
    instead of sending; Enter then sends all the lines as one message."""
    write_config(hermes_home, threaded_llm, "anthropic")
    with HermesTerminal(hermes_home, "chat") as term:
        term.wait_for(READY)
        term.type("line one")
        term.type(ALT_ENTER)
        term.type("line two")
        term.type(SHIFT_ENTER_SEQUENCES[1])
        term.type("line three")
        term.wait_for("line three")
        assert threaded_llm.requests == []  # not sent by Alt-Enter
        term.enter()
        term.wait_for("echo: line one")
        term.type(CTRL_D)
        assert term.wait_exit() == 0
        session_id = _resumed_id(term.text())
    users = [m for m in _stored(hermes_home, session_id) if m["role"] == "user"]
    assert [m["content"] for m in users] == ["line one\nline two\nline three"]


def _stored_ids(home: Path) -> list[str]:
    async def ids() -> list[str]:
        store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{home / 'state.db'}")
        try:
            return [s.id for s in await store.sessions.list_sessions(limit=20)]
        finally:
            await store.aclose()

    return asyncio.run(ids())


def test_a_tool_call_shows_its_command_and_a_folded_output_preview(
    threaded_llm: FakeLLM, hermes_home: Path
) -> None:
    """A command that needs no approval is not invisible: its name and command line appear as
    it starts, then its exit code, line count and the first lines of its output."""
    extra = "tools:\n  enabled: [terminal]\n  approval: ask\n"
    write_config(hermes_home, threaded_llm, "anthropic", extra=extra)
    threaded_llm.script(
        Turn(tool_calls=[ToolCallSpec("terminal", json.dumps({"command": "seq 1 12"}))]),
        Turn(text="counted to twelve"),
    )
    with HermesTerminal(hermes_home, "chat") as term:
        term.wait_for(READY)
        term.enter("count for me")
        screen = term.wait_for("counted to twelve")
        term.type(CTRL_D)
    lines = screen.splitlines()
    assert "⏺ terminal  seq 1 12" in screen, screen
    start = next(i for i, line in enumerate(lines) if "⏺ terminal  seq 1 12" in line)
    assert "⎿ exit 0 · 12 lines" in lines[start + 1]
    assert [line.strip() for line in lines[start + 2 : start + 5]] == ["1", "2", "3"]
    assert "… 9 more lines" in lines[start + 5]
