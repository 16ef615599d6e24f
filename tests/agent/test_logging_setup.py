"""Logging setup: readable console, JSON-lines file, and secrets redacted everywhere."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agent import redaction
from agent.logging_setup import configure_logging, redact_secrets, shutdown_logging
from agent.redaction import REDACTED, register_secret

ANTHROPIC_KEY = "sk-ant-api03-" + "A1b2C3d4" * 6
OPENAI_KEY = "sk-proj-" + "Z9y8X7w6" * 5
TELEGRAM_TOKEN = "123456789:" + "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
DISCORD_TOKEN = "MTA4NzY1NDMyMTA5ODc2NTQzMg" + ".GhIjKl." + "abcdefghijklmnopqrstuvwxyz0123"
CONFIG_SECRET = "local-llama-password-42"
ALL_SECRETS = (ANTHROPIC_KEY, OPENAI_KEY, TELEGRAM_TOKEN, DISCORD_TOKEN, CONFIG_SECRET)


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no registered secrets and leaves logging as it found it."""
    monkeypatch.setattr(redaction, "_secrets", frozenset())
    monkeypatch.setattr(redaction, "_secrets_re", None)
    root_level = logging.getLogger().level
    yield
    shutdown_logging()
    structlog.reset_defaults()
    logging.getLogger().setLevel(root_level)


def _emit_secrets() -> None:
    register_secret(CONFIG_SECRET)
    log = structlog.get_logger("hermes.test")
    log.info("provider_configured", api_key=ANTHROPIC_KEY, model="claude")
    log.warning(
        "request_failed",
        headers={"Authorization": f"Bearer {OPENAI_KEY}", "accept": "json"},
        detail=f"upstream said: bad key {OPENAI_KEY}",
    )
    log.info("discord_connected", note=f"token was {DISCORD_TOKEN}")
    log.info("custom_endpoint", url=f"http://127.0.0.1:8080/v1?x={CONFIG_SECRET}")
    logging.getLogger("httpx").info(
        "HTTP Request: POST %s", f"https://api.telegram.org/bot{TELEGRAM_TOKEN}/getUpdates"
    )
    logging.getLogger("discord.gateway").warning("identify failed for %s", DISCORD_TOKEN)


def test_secrets_reach_neither_console_nor_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keys in structlog events and library log records are redacted on stderr and in agent.log."""
    configure_logging(
        log_dir=tmp_path / "logs", level="info", console=True, loggers={"httpx": "info"}
    )
    _emit_secrets()
    shutdown_logging()
    console = capsys.readouterr().err
    text = (tmp_path / "logs" / "agent.log").read_text(encoding="utf-8")
    assert "provider_configured" in console and "HTTP Request: POST" in console
    assert "provider_configured" in text and "api.telegram.org/bot" in text
    for secret in ALL_SECRETS:
        assert secret not in console, secret
        assert secret not in text, secret
    assert text.count(REDACTED) >= 6 and console.count(REDACTED) >= 6


def test_file_holds_one_valid_json_object_per_line(tmp_path: Path) -> None:
    """agent.log holds JSON lines with event, level, logger and timestamp, for both sources."""
    configure_logging(log_dir=tmp_path, level="info", console=False, loggers={"httpx": "info"})
    _emit_secrets()
    shutdown_logging()
    lines = (tmp_path / "agent.log").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 6
    first = records[0]
    assert first["event"] == "provider_configured" and first["api_key"] == REDACTED
    assert first["level"] == "info" and first["logger"] == "hermes.test" and "timestamp" in first
    assert records[1]["headers"] == {"Authorization": REDACTED, "accept": "json"}
    assert records[4]["logger"] == "httpx"


def test_configuring_twice_does_not_double_handlers(tmp_path: Path) -> None:
    """A second configure_logging replaces the first's handlers, so each line is written once."""
    configure_logging(log_dir=tmp_path, level="info", console=True)
    configure_logging(log_dir=tmp_path, level="info", console=True)
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_hermes", False)]
    assert len(ours) == 2
    structlog.get_logger("t").info("only_once")
    shutdown_logging()
    assert (tmp_path / "agent.log").read_text().count("only_once") == 1


def test_file_is_appended_across_runs(tmp_path: Path) -> None:
    """A later process appends to agent.log instead of truncating it."""
    configure_logging(log_dir=tmp_path, console=False)
    structlog.get_logger("t").info("first_run")
    configure_logging(log_dir=tmp_path, console=False)
    structlog.get_logger("t").info("second_run")
    shutdown_logging()
    events = [json.loads(x)["event"] for x in (tmp_path / "agent.log").read_text().splitlines()]
    assert events == ["first_run", "second_run"]


def test_level_filters_structlog_and_stdlib(tmp_path: Path) -> None:
    """Below the configured level nothing is written, from either logging system."""
    configure_logging(log_dir=tmp_path, level="warning", console=False)
    structlog.get_logger("t").info("quiet_info")
    logging.getLogger("httpx").info("quiet stdlib")
    structlog.get_logger("t").warning("loud_warning")
    shutdown_logging()
    events = [json.loads(x)["event"] for x in (tmp_path / "agent.log").read_text().splitlines()]
    assert events == ["loud_warning"]


def test_unknown_level_is_rejected() -> None:
    """A misspelt level is an error naming the choices, not silent default logging."""
    with pytest.raises(ValueError, match="verbose"):
        configure_logging(log_dir=None, level="verbose")


def test_exception_tracebacks_are_redacted(tmp_path: Path) -> None:
    """A secret inside an exception message is scrubbed from the rendered traceback."""
    configure_logging(log_dir=tmp_path, console=False)
    try:
        raise RuntimeError(f"auth failed with {OPENAI_KEY}")
    except RuntimeError:
        structlog.get_logger("t").exception("call_failed")
    shutdown_logging()
    record = json.loads((tmp_path / "agent.log").read_text())
    assert "RuntimeError" in record["exception"] and OPENAI_KEY not in record["exception"]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"api_key": "abc"}, {"api_key": REDACTED}),
        ({"token": "x" * 10}, {"token": REDACTED}),
        ({"bot_token": "x"}, {"bot_token": REDACTED}),
        ({"password": "hunter2"}, {"password": REDACTED}),
        ({"client_secret": "s"}, {"client_secret": REDACTED}),
        ({"Authorization": "Bearer abcdefgh123"}, {"Authorization": REDACTED}),
        ({"max_tokens": 4096, "input_tokens": 12}, {"max_tokens": 4096, "input_tokens": 12}),
        ({"token_count": 7, "api_key": None}, {"token_count": 7, "api_key": None}),
        ({"event": f"key {OPENAI_KEY} used"}, {"event": f"key {REDACTED} used"}),
        (
            {"event": "Authorization: Bearer abc.def-ghi_123"},
            {"event": f"Authorization: Bearer {REDACTED}"},
        ),
        ({"event": f"GET /bot{TELEGRAM_TOKEN}/getMe"}, {"event": f"GET /bot{REDACTED}/getMe"}),
        ({"event": f"tok {DISCORD_TOKEN}"}, {"event": f"tok {REDACTED}"}),
        ({"event": "url?api_key=abc123&x=1"}, {"event": f"url?api_key={REDACTED}&x=1"}),
        ({"args": [f"{ANTHROPIC_KEY}", 3]}, {"args": [REDACTED, 3]}),
        ({"event": "sk-learn is fine", "n": 5}, {"event": "sk-learn is fine", "n": 5}),
        ({"event": "session 1234567:short"}, {"event": "session 1234567:short"}),
    ],
)
def test_redact_secrets_processor(event: dict[str, object], expected: dict[str, object]) -> None:
    """Sensitive keys and key-shaped strings are replaced; counts and plain words are kept."""
    assert redact_secrets(None, "info", dict(event)) == expected


def test_registered_secret_is_redacted_even_without_a_pattern() -> None:
    """A value registered from config is scrubbed anywhere; too-short values are ignored."""
    register_secret("plain-words-secret")
    register_secret("short")
    register_secret(None)
    event = {"event": "using plain-words-secret now", "other": "short story"}
    assert redact_secrets(None, "info", event) == {
        "event": f"using {REDACTED} now",
        "other": "short story",
    }


def test_agent_log_rotates_at_its_size(tmp_path: Path) -> None:
    """At `max_bytes` agent.log moves to agent.log.1 (older ones shift on), `backups` old files
    are kept and the oldest dropped; every file stays whole JSON lines, the newest in agent.log."""
    configure_logging(log_dir=tmp_path, console=False, max_bytes=10_000, backups=2)
    log = structlog.get_logger("t")
    for n in range(400):
        log.info("tick", n=n, pad="x" * 40)
    shutdown_logging()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["agent.log", "agent.log.1", "agent.log.2"]
    numbers = {}
    for name in names:
        lines = (tmp_path / name).read_text(encoding="utf-8").splitlines()
        assert (tmp_path / name).stat().st_size <= 10_000
        numbers[name] = [json.loads(line)["n"] for line in lines]
    assert numbers["agent.log"][-1] == 399
    assert numbers["agent.log.2"][-1] < numbers["agent.log.1"][0] <= numbers["agent.log"][0]


def test_chatty_libraries_are_quiet_by_default_and_can_be_turned_up(tmp_path: Path) -> None:
    """httpx's per-request info lines and aiosqlite's debug statements stay out of agent.log even
    at debug; `loggers` brings one back; shutting down gives the loggers their levels back."""
    before = logging.getLogger("httpx").level
    configure_logging(log_dir=tmp_path, level="debug", console=False)
    logging.getLogger("httpx").info("HTTP Request: POST /v1/messages")
    logging.getLogger("aiosqlite").debug("executing SELECT 1")
    structlog.get_logger("agent.x").debug("ours_at_debug")
    configure_logging(log_dir=tmp_path, level="info", console=False, loggers={"httpx": "info"})
    logging.getLogger("httpx").info("HTTP Request: now shown")
    shutdown_logging()
    events = [json.loads(x)["event"] for x in (tmp_path / "agent.log").read_text().splitlines()]
    assert events == ["ours_at_debug", "HTTP Request: now shown"]
    assert logging.getLogger("httpx").level == before


def test_a_warning_with_an_action_reaches_the_console_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the full console, a warning telling the user what to do is printed on stderr,
    once however often it recurs; other events stay in agent.log only."""
    configure_logging(log_dir=tmp_path, console=False)
    log = structlog.get_logger("t")
    for _ in range(3):
        log.warning("metrics_exposed", action="keep /metrics behind a firewall")
    log.warning("plain_warning")
    log.info("informed", action="not a warning, not shown")
    shutdown_logging()
    err = capsys.readouterr().err
    assert err == "hermes: warning: keep /metrics behind a firewall\n"
    assert (tmp_path / "agent.log").read_text().count("metrics_exposed") == 3


def test_an_unwritable_log_folder_falls_back_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log folder that cannot be created (here under a regular file: ENOTDIR even for root;
    a read-only HERMES_HOME behaves the same) is one warning line, and warnings then go to
    stderr instead of failing the command with an OSError (issue 19)."""
    blocker = tmp_path / "home"
    blocker.write_text("not a folder")
    configure_logging(log_dir=blocker / "logs", console=False)
    log = structlog.get_logger("t")
    log.info("quiet_info")
    log.warning("store_failed", error_type="OperationalError")
    shutdown_logging()
    err = capsys.readouterr().err
    assert err.startswith(f"hermes: warning: cannot write {blocker / 'logs' / 'agent.log'} (")
    assert "warnings go to stderr instead" in err
    assert "store_failed" in err and "quiet_info" not in err
    assert blocker.read_text() == "not a folder"
