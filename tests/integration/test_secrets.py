"""End to end: secrets from the environment and from command output never reach the store, the
model or the logs.

A real Runtime on FakeLLM and SQLite runs a terminal turn whose commands try every leak of
issue 18: the environment (`env`), a file full of unregistered keys (`GH_TOKEN=ghp_…`,
`MY_SERVICE_TOKEN=…`, `ANTHROPIC_API_KEY_2=sk-ant-…`), a registered key through `rev`,
`base64`, rot13 `tr`, upper-case `tr` and `od` hex, and our own environment via /proc; the
user's message pastes a key too. The checks read what FakeLLM received, the raw bytes of the
database and its WAL, and agent.log. (Summaries: tests/agent/test_context_compressor.py and
tests/agent/test_micro_compaction.py.)
"""

from __future__ import annotations

import base64
import codecs
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agent import redaction
from agent.logging_setup import LOG_FILE_NAME, configure_logging, shutdown_logging
from agent.redaction import REDACTED
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.gateway.harness import RecordingSink, inbound, make_config

ENV_KEY = "sk-ant-api03-" + "Q7w8E9r0T1y2" * 4
"""In Hermes's environment as ANTHROPIC_API_KEY_2: registered at start-up by its name."""
GH = "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8"
SERVICE = "tok3f9a8b7c6d5e4f3a2b1c0"
ENV = {
    "ANTHROPIC_API_KEY_2": ENV_KEY,
    "GH_TOKEN": GH,
    "MY_SERVICE_TOKEN": SERVICE,
}
LEAKS = f"GH_TOKEN={GH}\nMY_SERVICE_TOKEN={SERVICE}\nANTHROPIC_API_KEY_2={ENV_KEY}\n"
COMMANDS = [
    "env",
    "cat leaks.txt",
    "rev key.txt",
    "base64 -w0 key.txt",
    "tr a-zA-Z n-za-mN-ZA-M < key.txt",
    "tr a-z A-Z < key.txt",
    "od -An -tx1 key.txt | tr -d ' \\n'",
    "cat /proc/$PPID/environ",
]


def _forms(value: str) -> list[str]:
    raw = value.encode()
    return [
        value,
        value[::-1],
        base64.b64encode(raw).decode().rstrip("="),
        codecs.encode(value, "rot13"),
        value.upper(),
        raw.hex(),
    ]


FORBIDDEN = [form for secret in ENV.values() for form in _forms(secret)]


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Start-up as run_agent does it: secret-named variables registered, logging to a file."""
    from agent.config import HermesConfig
    from run_agent import _secrets

    monkeypatch.setattr(redaction, "_secrets", frozenset())
    monkeypatch.setattr(redaction, "_secrets_re", None)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    log_dir = tmp_path / "logs"
    configure_logging(log_dir=log_dir, level="debug", console=False)
    for secret in _secrets(HermesConfig()):
        redaction.register_secret(secret)
    yield log_dir
    shutdown_logging()
    structlog.reset_defaults()


async def test_no_secret_reaches_model_store_or_logs(tmp_path: Path, registered: Path) -> None:
    """Every leak is scrubbed before the model, the database and agent.log see it."""
    from cli.runtime import Runtime

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "leaks.txt").write_text(LEAKS)
    (workspace / "key.txt").write_text(ENV_KEY)
    db = tmp_path / "state.db"
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), **ENV}
    calls = [ToolCallSpec("terminal", json.dumps({"command": c})) for c in COMMANDS]
    async with FakeLLM() as llm:
        llm.script(Turn(tool_calls=calls), Turn(text="checked"))
        config = make_config(llm, db, tools={"enabled": ["terminal"], "workspace": str(workspace)})
        async with await Runtime.start(config, tmp_path, environ) as runtime:
            runner = GatewayRunner(runtime)
            await runner.submit(inbound(f"audit the environment; my key is {GH}"), RecordingSink())
            await runner.stop()
        llm.assert_complete()
        received = json.dumps([r.json for r in llm.requests])
    shutdown_logging()
    stored, logged = _stored_bytes(tmp_path), (registered / LOG_FILE_NAME).read_text()
    assert REDACTED in received and REDACTED.encode() in stored  # the leaks were there
    assert "reads another process" in received  # /proc/$PPID/environ was refused
    for form in FORBIDDEN:
        assert form not in received, form
        assert form.encode() not in stored, form
        assert form not in logged, form


def _stored_bytes(home: Path) -> bytes:
    """The database and its WAL, byte for byte (every table, the FTS index included)."""
    return b"".join(p.read_bytes() for p in sorted(home.glob("state.db*")))


async def test_commands_never_see_secret_variables(tmp_path: Path) -> None:
    """The scrubbed environment holds PATH, HOME, LANG and TERM only: nothing to leak."""
    from agent.tools.sandbox import command_environment

    environ = {"PATH": "/bin", "HOME": "/h", "LANG": "C", "TERM": "xterm", **ENV, "USER": "me"}
    assert command_environment(environ) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C",
        "TERM": "xterm",
    }
