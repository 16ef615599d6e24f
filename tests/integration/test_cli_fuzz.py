"""`hermes chat -q` over random text: any Unicode, lone surrogates (what undecodable argv bytes
become under PEP 383's surrogateescape), NUL, control characters, empty and blank values.

Whatever comes in: no traceback; an accepted message makes exactly one session holding the
text as every database keeps it (`storable_text`); a refused one (blank) stores nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import run_agent
from sim.llm_server import FakeLLM
from state import SqlSessionStore, default_url
from state.values import storable_text
from tests.integration.test_chat_cli import write_config

ANY_TEXT = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), min_size=0, max_size=300
) | st.sampled_from(["", " ", "\n", "\x00", "\ud800", "\udcff", "\t\r\n", "\u202e"])


async def _sessions(home: Path) -> dict[str, list[str]]:
    """Session id -> the user messages it holds."""
    store = await SqlSessionStore.open(default_url(home))
    try:
        return {
            s.id: [
                str(m.get("content"))
                for m in await store.transcript.load_active(s.id)
                if m["role"] == "user"
            ]
            for s in await store.sessions.list_sessions(limit=1000)
        }
    finally:
        await store.aclose()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=ANY_TEXT.filter(lambda t: t != "-" and not t.lstrip().startswith("/")))
def test_any_text_is_answered_or_refused_in_one_sentence(
    text: str, threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(hermes_home, threaded_llm, "openai")
    before = asyncio.run(_sessions(hermes_home)) if (hermes_home / "state.db").exists() else {}
    # `--query=` so a text that starts with "-" is not read as an option; "-" itself reads
    # stdin and a leading "/" is a chat command (both tested on their own).
    code = run_agent.main(["chat", f"--query={text}", "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    after = asyncio.run(_sessions(hermes_home))
    if not text.strip():
        assert code == 2, err
        assert [line for line in err.splitlines() if line.startswith("hermes: ")] == [
            "hermes: the message is empty; give the text after -q, or pipe it in with -q -"
        ]
        assert len(after) == len(before), "a refused message stored nothing"
        return
    assert code == 0, err
    reply = json.loads(out)
    assert reply["reply"].startswith("echo:")
    assert len(after) == len(before) + 1
    assert [after[s] for s in after.keys() - before.keys()] == [[storable_text(text)]]


def test_a_message_over_the_limit_is_refused_before_a_session_exists(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """3 MB piped to `chat -q -`: one sentence naming the limit, exit 1, no session, no
    model call."""
    import io

    write_config(hermes_home, threaded_llm, "openai")
    monkeypatch.setattr("sys.stdin", io.StringIO("a" * 3_000_000))
    code = run_agent.main(["chat", "-q", "-"])
    err = capsys.readouterr().err
    assert code == 1
    assert "gateway.max_message_chars allows 200,000" in err and "Traceback" not in err
    assert asyncio.run(_sessions(hermes_home)) == {}
    assert threaded_llm.requests == []
