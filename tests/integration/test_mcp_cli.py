"""MCP from the command line: `hermes chat -q` starts the configured servers and stops them when
it ends; `hermes mcp list` and `hermes mcp test NAME` show servers, states and tools."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import run_agent
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.agent.mcp.servers import ROOT, everything_server, python_server


def _config(home: Path, fake: FakeLLM, servers: dict[str, dict[str, object]]) -> None:
    config = {
        "model": {
            "provider": "anthropic",
            "default": "claude-sonnet-4-6",
            "base_url": fake.url,
            "api_key": "test-key",
            "context_length": 128000,
        },
        "mcp": {"servers": servers},
    }
    (home / "config.yaml").write_text(json.dumps(config))  # JSON is YAML


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_chat_starts_the_server_uses_its_tool_and_stops_it(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One `chat -q` turn calls srv__pid; once the command returns, that process is gone."""
    monkeypatch.chdir(ROOT)
    _config(hermes_home, threaded_llm, {"srv": python_server()})
    threaded_llm.script(Turn(tool_calls=[ToolCallSpec("srv__pid", "{}")]), Turn(text="noted"))
    code = run_agent.main(["chat", "-q", "what is your server's pid?"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "noted\n"
    sent = json.dumps(threaded_llm.requests[-1].json)
    pids = [int(p) for p in re.findall(r'"content": "(\d+)"', sent)]
    assert pids, sent
    assert not _alive(pids[-1])
    assert (hermes_home / "logs" / "mcp-srv.log").exists()


def test_chat_goes_on_when_a_server_cannot_start(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A broken server is one notice on stderr; the turn answers without its tools."""
    _config(hermes_home, threaded_llm, {"broken": {"command": str(tmp_path / "missing")}})
    code = run_agent.main(["chat", "-q", "hello"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "echo: hello\n"
    assert "MCP server broken is not available" in err
    assert "tools" not in (threaded_llm.requests[-1].json or {}) or not any(
        t["name"].startswith("broken__")
        for t in threaded_llm.requests[-1].json["tools"]  # type: ignore[index]
    )


def test_mcp_list_and_test(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`list` shows each server's state and its tools (exit 1 when one failed); `test` shows
    one server's tools with their sizes; an unknown name is a one-sentence error."""
    servers = {"ev": everything_server(), "broken": {"command": str(tmp_path / "missing")}}
    _config(hermes_home, threaded_llm, servers)
    assert run_agent.main(["mcp", "list"]) == 1
    out = capsys.readouterr().out
    assert "ev               stdio  connected, 13 tools" in out
    assert "    ev__get-sum" in out
    assert "broken           stdio  failed: FileNotFoundError" in out

    assert run_agent.main(["mcp", "test", "ev"]) == 0
    out = capsys.readouterr().out
    assert "ev__echo" in out and " B  [ev] Echoes back the input string" in out
    assert "13 tools," in out and "bytes of schema if all were sent" in out

    assert run_agent.main(["mcp", "test", "nope"]) != 0
    err = capsys.readouterr().err
    assert "no MCP server 'nope'" in err and "ev, broken" in err


def test_a_key_given_to_a_server_never_reaches_the_model(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A server's `env` holds a key (a value with no key shape); the server hands it back bare:
    the model sees [REDACTED], never the value (start-up registers it with the redactor)."""
    monkeypatch.chdir(ROOT)
    secret = "plain-looking-value-" + os.urandom(6).hex()
    _config(hermes_home, threaded_llm, {"srv": python_server(env={"NOTES_API_KEY": secret})})
    call = ToolCallSpec("srv__getenv", json.dumps({"name": "NOTES_API_KEY"}))
    threaded_llm.script(Turn(tool_calls=[call]), Turn(text="ok"))
    assert run_agent.main(["chat", "-q", "show the key"]) == 0, capsys.readouterr().err
    sent = json.dumps(threaded_llm.requests[-1].json)
    assert "[REDACTED]" in sent
    assert secret not in sent
