"""`hermes chat -q` end to end: real SDKs against the fake LLM, real store, real tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import run_agent
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from state import SqlSessionStore, default_url

ROUTES = {
    "anthropic": ("anthropic", "claude-sonnet-4-6", "root"),
    "openai": ("openai", "gpt-4o", "v1"),
    "openrouter": ("openrouter", "anthropic/claude-sonnet-4-6", "v1"),
    "custom": ("custom", "llama3.1-8b", "v1"),
}


def write_config(
    home: Path, fake: FakeLLM, route: str, *, extra: str = "", key: str = "test-key"
) -> None:
    provider, model, base = ROUTES[route]
    base_url = fake.url if base == "root" else fake.openai_base_url
    key_line = f"  api_key: {key}\n" if key else ""
    (home / "config.yaml").write_text(
        f"model:\n  provider: {provider}\n  default: {model}\n  base_url: {base_url}\n{key_line}"
        f"  context_length: 128000\n  max_retries: 2\n{extra}"
    )


def chat(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict | str, str]:
    code = run_agent.main(["chat", *args])
    out, err = capsys.readouterr()
    if "--json" in args and code == 0:
        return code, json.loads(out), err
    return code, out, err


@pytest.mark.parametrize("route", list(ROUTES))
def test_one_turn_on_every_provider_kind(
    route: str, threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each provider kind answers one turn and reports reply, session id and usage as JSON."""
    write_config(hermes_home, threaded_llm, route)
    code, data, err = chat(capsys, "-q", "hello there", "--json")
    assert code == 0, err
    assert isinstance(data, dict)
    assert data["reply"] == "echo: hello there"
    assert data["session_id"]
    assert data["usage"]["prompt_tokens"] > 0
    assert data["usage"]["output_tokens"] > 0


def test_streamed_reply_is_printed(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json the reply streams to stdout, ending with a newline."""
    write_config(hermes_home, threaded_llm, "anthropic")
    code, out, _ = chat(capsys, "-q", "stream me")
    assert code == 0
    assert out == "echo: stream me\n"


def test_tool_round_trip(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The model calls read_file, gets the file's content, then answers."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("the launch code is pineapple\n")
    write_config(hermes_home, threaded_llm, "anthropic")
    threaded_llm.script(
        Turn(tool_calls=[ToolCallSpec("read_file", '{"path": "notes.txt"}')]),
        Turn(text="The note says pineapple."),
    )
    code, data, err = chat(capsys, "-q", "what does notes.txt say?", "--json")
    assert code == 0, err
    assert data["reply"] == "The note says pineapple."
    assert data["model_calls"] == 2
    second = threaded_llm.requests[-1].json
    assert second is not None
    results = [
        b
        for m in second["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    assert len(results) == 1
    assert "pineapple" in json.dumps(results[0])


def test_resume_continues_the_session(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--resume sends the earlier exchange with the new message, from the store."""
    write_config(hermes_home, threaded_llm, "openai")
    _, first, _ = chat(capsys, "-q", "my name is Ada", "--json")
    code, second, err = chat(
        capsys, "-q", "what is my name?", "--resume", first["session_id"], "--json"
    )
    assert code == 0, err
    assert second["session_id"] == first["session_id"]
    sent = threaded_llm.requests[-1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"] == "my name is Ada"
    assert sent[2]["content"] == "echo: my name is Ada"


def test_resume_of_unknown_session_is_a_clear_error(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown session id says so and points at `hermes sessions list`."""
    write_config(hermes_home, threaded_llm, "openai")
    code, _, err = chat(capsys, "-q", "hi", "--resume", "nope")
    assert code == 2
    assert "no session 'nope'" in err and "sessions list" in err


def test_missing_key_is_one_clear_sentence(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No key anywhere: one line naming what to set, no traceback, nothing sent."""
    write_config(hermes_home, threaded_llm, "anthropic", key="")
    code, _, err = chat(capsys, "-q", "hi")
    assert code == 1
    assert "ANTHROPIC_API_KEY" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert threaded_llm.requests == []


def test_wrong_key_is_an_auth_error(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key the provider rejects is reported as an auth problem with what to set."""
    write_config(hermes_home, threaded_llm, "anthropic", key="wrong-key")
    code, _, err = chat(capsys, "-q", "hi")
    assert code == 1
    assert "ProviderAuthError" in err and "api_key" in err
    assert "wrong-key" not in err


def test_unreachable_endpoint(hermes_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A closed port gives one sentence about the endpoint after bounded retries."""
    (hermes_home / "config.yaml").write_text(
        "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n"
        "  context_length: 8000\n  max_retries: 1\n"
    )
    code, _, err = chat(capsys, "-q", "hi")
    assert code == 1
    assert "ProviderUnavailable" in err and "model.base_url" in err
    assert "Traceback" not in err


def test_rate_limit_then_success(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 429 is retried after its retry-after, and the turn succeeds."""
    write_config(hermes_home, threaded_llm, "anthropic")
    threaded_llm.script(Turn(error=(429, "rate_limit_error", "slow down")), Turn(text="fine now"))
    code, data, err = chat(capsys, "-q", "hi", "--json")
    assert code == 0, err
    assert data["reply"] == "fine now"
    assert len(threaded_llm.requests) == 2


def test_server_error_storm_gives_up(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of 500s is retried max_retries times, then reported; the user's message is kept."""
    write_config(hermes_home, threaded_llm, "openai")
    threaded_llm.script(*[Turn(error=(500, "server_error", "boom"))] * 5)
    code, _, err = chat(capsys, "-q", "are you there?")
    assert code == 1
    assert "ProviderUnavailable" in err
    assert len(threaded_llm.requests) == 3  # first try + max_retries (2)
    assert run_agent.main(["sessions", "search", "are you there", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 1


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (ToolCallSpec("read_file", '{"path": "x.txt"'), "not valid JSON"),
        (ToolCallSpec("launch_rockets", "{}"), "unknown tool 'launch_rockets'"),
    ],
)
def test_malformed_tool_calls_go_back_to_the_model(
    call: ToolCallSpec,
    expected: str,
    threaded_llm: FakeLLM,
    hermes_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Invalid JSON arguments or an unknown tool become a tool result; the turn goes on."""
    write_config(hermes_home, threaded_llm, "openai")
    threaded_llm.script(Turn(tool_calls=[call]), Turn(text="sorry, retrying differently"))
    code, data, err = chat(capsys, "-q", "do it", "--json")
    assert code == 0, err
    assert data["reply"] == "sorry, retrying differently"
    tool_msgs = [m for m in threaded_llm.requests[-1].json["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and expected in tool_msgs[0]["content"]


def test_bad_config_names_the_key(hermes_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in config.yaml stops the command with the key and the file named."""
    (hermes_home / "config.yaml").write_text("compresion:\n  enabled: true\n")
    code, _, err = chat(capsys, "-q", "hi")
    assert code == 2
    assert "unknown key 'compresion'" in err and str(hermes_home / "config.yaml") in err


def test_our_keys_never_reach_the_model_or_the_store(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A tool that prints the configured API key hands the model and the store [REDACTED]."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("ANTHROPIC_API_KEY=test-key\n")
    write_config(hermes_home, threaded_llm, "anthropic")
    threaded_llm.script(
        Turn(tool_calls=[ToolCallSpec("read_file", '{"path": ".env"}')]), Turn(text="done")
    )
    code, data, err = chat(capsys, "-q", "show me .env", "--json")
    assert code == 0, err
    sent = json.dumps(threaded_llm.requests[-1].json["messages"])
    assert "test-key" not in sent and "[REDACTED]" in sent
    assert run_agent.main(["sessions", "export", data["session_id"], "--format", "jsonl"]) == 0
    exported = capsys.readouterr().out
    assert "test-key" not in exported and "[REDACTED]" in exported


def test_plain_output_ends_with_the_session_id_on_stderr(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reply goes to stdout; stderr's last line says how to resume that very session."""
    write_config(hermes_home, threaded_llm, "anthropic")
    code, out, err = chat(capsys, "-q", "hello")
    assert code == 0 and out == "echo: hello\n"
    last = err.strip().splitlines()[-1]
    assert last.startswith("resume with: hermes chat --resume ")
    session_id = last.rsplit(" ", 1)[1]
    code, data, _ = chat(capsys, "-q", "again", "--resume", session_id, "--json")
    assert code == 0 and data["session_id"] == session_id


def test_dash_reads_the_message_from_stdin(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`-q -` sends what stdin holds (several lines), not a literal "-"."""
    import io

    write_config(hermes_home, threaded_llm, "anthropic")
    monkeypatch.setattr("sys.stdin", io.StringIO("first line\nsecond line\n"))
    code, data, err = chat(capsys, "-q", "-", "--json")
    assert code == 0, err
    assert data["reply"] == "echo: first line\nsecond line"
    monkeypatch.setattr("sys.stdin", io.StringIO("  \n"))
    code, _, err = chat(capsys, "-q", "-")
    assert code == 2 and "the message is empty" in err
    assert len(threaded_llm.requests) == 1


def test_one_shot_chat_runs_chat_commands_without_the_model(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-q /status` answers from the runner's commands; an unknown `/comand` is answered
    locally with the close match; neither reaches the model."""
    write_config(hermes_home, threaded_llm, "anthropic")
    code, data, _ = chat(capsys, "-q", "my name is Ada", "--json")
    session_id = data["session_id"]
    code, out, err = chat(capsys, "-q", "/status", "--resume", session_id)
    assert code == 0, err
    assert f"Session {session_id}" in out and "model claude-sonnet-4-6" in out
    code, out, _ = chat(capsys, "-q", "/stauts", "--resume", session_id)
    assert code == 0 and "Unknown command /stauts. Did you mean /status or /start?" in out
    assert len(threaded_llm.requests) == 1


def test_one_shot_chat_at_90_percent_is_compacted_by_hygiene_first(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session left at 90% of the window: the next `chat -q` compacts it (session hygiene,
    85%) before its own request, says so on stderr, and sends the compacted history."""
    from tests.gateway.harness import is_summary_request, summary_responder

    extra = (  # a small reply reserve lets our own request leave the session at 90%
        "  reply_reserve_tokens: 300\n"
        "compression:\n  speculative: false\n  micro_compact: false\n  protect_last_n: 2\n"
        "tools:\n  enabled: []\n"
    )
    write_config(hermes_home, threaded_llm, "anthropic", extra=extra)
    (hermes_home / "config.yaml").write_text(
        (hermes_home / "config.yaml").read_text().replace("128000", "8000")
    )
    threaded_llm.responder = summary_responder()
    threaded_llm.script(Turn(text="noted"), Turn(text="noted"), Turn(text="fresh answer"))
    big = "alpha " * 2400  # about 3,600 tokens at chars/4
    _, first, _ = chat(capsys, "-q", "first " + big, "--json")
    session_id = first["session_id"]
    _, second, _ = chat(capsys, "-q", "second " + big, "--resume", session_id, "--json")
    assert 0.85 * 8000 <= second["usage"]["prompt_tokens"] < 8000
    before = len(threaded_llm.requests)
    code, out, err = chat(capsys, "-q", "what now?", "--resume", session_id)
    assert code == 0, err
    assert out == "fresh answer\n"
    assert "compacted 5 → " in err and "Older context was compacted" in err
    summary, turn = threaded_llm.requests[before:]
    assert summary.json is not None and is_summary_request(summary.json)
    assert turn.json is not None and not is_summary_request(turn.json)
    assert "first alpha" not in str(turn.json["messages"])


def test_undecodable_argv_is_answered_and_stored_once(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hermes chat -q $'\\xff'`: the byte arrives as U+DCFF (PEP 383); the turn is answered
    with it as U+FFFD and exactly one session holds it."""
    write_config(hermes_home, threaded_llm, "openai")
    code = run_agent.main(["chat", "-q", "caf\udcff!"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out == "echo: caf\ufffd!\n"

    async def stored() -> list[list[str]]:
        store = await SqlSessionStore.open(default_url(hermes_home))
        try:
            sessions = await store.sessions.list_sessions()
            return [
                [str(m.get("content")) for m in await store.transcript.load_active(s.id)]
                for s in sessions
            ]
        finally:
            await store.aclose()

    transcripts = asyncio.run(stored())
    assert len(transcripts) == 1
    assert transcripts[0][-2:] == ["caf\ufffd!", "echo: caf\ufffd!"]
