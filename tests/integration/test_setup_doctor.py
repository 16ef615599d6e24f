"""`hermes setup` and `hermes doctor` end to end against the fake model server: the real CLI,
keys typed through prompt_toolkit's input, the endpoint probed over loopback.

Contract of the probe (docs.anthropic.com/en/api/models-list; platform.openai.com/docs/
api-reference/models/list): `GET /v1/models` answers 200 with `data: [{id, …}]`, 401 for a
missing or wrong key; a closed port refuses the connection.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

import run_agent
from agent.tools.sandbox import bwrap_problem
from sim.llm_server import FakeLLM
from tests.integration.test_chat_cli import write_config

DOWN, ENTER = "\x1b[B", "\r"
DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing listens on it


def _setup(capsys: pytest.CaptureFixture[str], *keys: str) -> tuple[int, str]:
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text("".join(keys))
        code = run_agent.main(["setup"])
    return code, capsys.readouterr().out


def _doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = run_agent.main(["doctor"])
    return code, capsys.readouterr().out.splitlines()


def _line(lines: list[str], name: str) -> str:
    found = [line for line in lines if line[2:].startswith(name + " ")]
    assert len(found) == 1, lines
    return found[0]


def test_setup_anthropic_asks_again_after_a_wrong_key_and_writes_config(
    threaded_llm: FakeLLM,
    hermes_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Anthropic through a relay URL: a refused key is said and asked again; the good one, the
    model (the default the server lists) and the URL are written; the file is owner-only."""
    threaded_llm.models = {"claude-sonnet-4-6": {}, "claude-haiku-4-5": {}}
    monkeypatch.setenv("ANTHROPIC_BASE_URL", threaded_llm.url)
    (hermes_home / "config.yaml").write_text("# my notes\nagent:\n  max_iterations: 9\n")
    code, out = _setup(capsys, ENTER, "wrong-key", ENTER, "test-key", ENTER, ENTER)
    assert code == 0, out
    assert "refused the key you typed (401)" in out and "Type the key again" in out
    assert "answers and lists 2 models" in out
    assert "Window: 200,000 tokens (the table of known models)" in out
    text = (hermes_home / "config.yaml").read_text()
    assert text.startswith("# my notes\nagent:\n  max_iterations: 9\n")
    assert "provider: anthropic" in text and "default: claude-sonnet-4-6" in text
    assert f"base_url: {threaded_llm.url}" in text and "api_key: test-key" in text
    assert stat.S_IMODE(os.stat(hermes_home / "config.yaml").st_mode) == 0o600
    keys = [r.headers.get("x-api-key") for r in threaded_llm.requests if r.api == "models"]
    assert keys == ["wrong-key", "test-key"]
    code, lines = _doctor(capsys)
    assert code == 0, lines
    assert _line(lines, "model").startswith("✓") and "claude-sonnet-4-6 is served" in _line(
        lines, "model"
    )


def test_setup_local_server_asks_for_another_url_when_the_first_is_dead(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ollama at a dead address: "cannot reach" and a second URL; the server's one model and
    the window it reports are found; provider ollama with that URL is written."""
    threaded_llm.expected_key = None
    threaded_llm.models = {"qwen3-8b": {"context_length": 40_960}}
    keys = (DOWN * 3, ENTER, ENTER, DEAD, ENTER, threaded_llm.openai_base_url, ENTER)
    code, out = _setup(capsys, *keys)
    assert code == 0, out
    assert f"cannot reach {DEAD}/models (connection refused)" in out
    assert "Model: qwen3-8b (the only one the server has)" in out
    assert "Window: 40,960 tokens (reported by the endpoint)" in out
    text = (hermes_home / "config.yaml").read_text()
    assert "provider: ollama" in text and "default: qwen3-8b" in text
    assert f"base_url: {threaded_llm.openai_base_url}" in text and "api_key" not in text


def test_setup_gives_up_cleanly_after_three_dead_urls(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing answers: setup says so in one line and leaves config.yaml as it was."""
    keys = (DOWN * 3, ENTER, DOWN, ENTER, DEAD, ENTER, DEAD, ENTER, DEAD, ENTER)
    code, out = _setup(capsys, *keys)
    assert code == 1
    assert out.strip().splitlines()[-1] == (
        "hermes: the vllm server did not answer; config.yaml is unchanged."
    )
    assert not (hermes_home / "config.yaml").exists()


def test_doctor_all_good(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A working setup: every check passes, one line each, and the window says where it came from."""
    threaded_llm.models = {"claude-sonnet-4-6": {}}
    write_config(hermes_home, threaded_llm, "anthropic")
    code, lines = _doctor(capsys)
    assert code == 0, lines
    assert [line[2:].split()[0] for line in lines[:-1]] == [
        "config",
        "key",
        "endpoint",
        "model",
        "window",
        "store",
        "sandbox",
        "gateway",
    ]
    sandbox_mark = "✓" if bwrap_problem() is None else "!"  # a missing bwrap is a warning
    assert _line(lines, "sandbox").startswith(sandbox_mark)
    others = [line for line in lines[:-1] if line[2:].split()[0] != "sandbox"]
    assert all(line.startswith("✓") for line in others) and lines[-1] == "All good."
    assert "128,000 tokens (model.context_length in config.yaml)" in _line(lines, "window")
    assert "schema version" in _line(lines, "store")


@pytest.mark.parametrize(
    ("route", "key", "name", "says", "fix"),
    [
        (
            "anthropic",
            "wrong-key",
            "endpoint",
            "refused the key in model.api_key",
            "put a valid key",
        ),
        ("anthropic", "", "key", "no API key for anthropic", "export ANTHROPIC_API_KEY"),
        ("dead", "", "endpoint", "cannot reach http://127.0.0.1:9/v1/models", "start the server"),
    ],
)
def test_doctor_names_the_failure_and_its_fix(
    route: str,
    key: str,
    name: str,
    says: str,
    fix: str,
    threaded_llm: FakeLLM,
    hermes_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A wrong key, no key, a dead endpoint: the failing line says what and how to fix it;
    exit 1; the checks that need it are skipped, the rest still run."""
    if route == "dead":
        (hermes_home / "config.yaml").write_text(
            f"model:\n  provider: vllm\n  default: m\n  base_url: {DEAD}\n"
        )
    else:
        write_config(hermes_home, threaded_llm, route, key=key)
    code, lines = _doctor(capsys)
    assert code == 1
    line = _line(lines, name)
    assert line.startswith("✗") and says in line and f"fix: {fix}" in line
    assert _line(lines, "store").startswith("✓")
    assert "wrong-key" not in "\n".join(lines)


def test_doctor_reports_a_model_the_server_does_not_have_and_broken_yaml(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model the endpoint does not list fails with the command that picks one it has; a
    broken config.yaml is one line with its line number."""
    threaded_llm.models = {"claude-haiku-4-5": {}}
    write_config(hermes_home, threaded_llm, "anthropic")
    code, lines = _doctor(capsys)
    assert code == 1
    assert "fix: hermes config set model.default claude-haiku-4-5" in _line(lines, "model")
    (hermes_home / "config.yaml").write_text("model:\n  default: [oops\n")
    code, lines = _doctor(capsys)
    assert code == 1 and _line(lines, "config").startswith("✗")
    assert ", line 3: not valid YAML" in _line(lines, "config")


def test_doctor_deep_reads_every_page_and_names_the_recovery(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Damage in the middle of state.db: `doctor --deep` (PRAGMA integrity_check, sqlite.org/
    pragma.html#pragma_integrity_check) fails the store line with `.recover` as the fix; on a
    sound file it says every page was checked."""
    import asyncio

    from state import SqlSessionStore, default_url
    from tests.state.test_faults import _damage

    threaded_llm.models = {"claude-sonnet-4-6": {}}
    write_config(hermes_home, threaded_llm, "anthropic")

    async def fill() -> None:
        store = await SqlSessionStore.open(default_url(hermes_home))
        try:
            info = await store.sessions.create_session()
            for n in range(60):
                await store.transcript.append(
                    info.id, [{"role": "user", "content": f"row {n} " + "w" * 3_000}]
                )
        finally:
            await store.aclose()

    asyncio.run(fill())
    code = run_agent.main(["doctor", "--deep"])
    sound = _line(capsys.readouterr().out.splitlines(), "store")
    assert code == 0 and sound.startswith("✓") and "every page checked" in sound
    _damage(hermes_home / "state.db")
    code = run_agent.main(["doctor", "--deep"])
    damaged = _line(capsys.readouterr().out.splitlines(), "store")
    assert code == 1
    assert damaged.startswith("✗") and "damaged" in damaged and ".recover" in damaged
