"""Test-wide guards and fixtures: no traffic leaves loopback, every test has its own HERMES_HOME."""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: object) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    if not isinstance(address, tuple) or not address:
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


def _tls_built_once() -> None:
    """Every httpx client the tests build (PTB's, the SDK clients the tests drive, their own)
    makes a fresh TLS context and loads the CA store into it: ~60 ms of CPU each, a few
    thousand times a run, for traffic that is all plain-HTTP loopback. The default context
    (verify on, no client cert) is built once per process instead, the way the runtime's
    own SDK clients share theirs (`agent/providers/tls.py`); other arguments pass through."""
    import httpx._transports.default as httpx_default
    import httpx2._transports.default as httpx2_default

    httpx_default.create_ssl_context = _once_by_default(httpx_default.create_ssl_context)  # type: ignore[attr-defined]
    httpx2_default.create_ssl_context = _once_by_default(httpx2_default.create_ssl_context)  # type: ignore[attr-defined]


def _once_by_default(build: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    built: list[ssl.SSLContext] = []

    def create_ssl_context(
        verify: object = True, cert: object = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert is not None or not trust_env:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        if not built:
            built.append(build())
        return built[0]

    return create_ssl_context


_tls_built_once()

# This machine kind exports PYTHONDONTWRITEBYTECODE=1, so every process (the xdist workers and
# every `hermes` subprocess a test starts) compiled the project's modules from source again:
# ~0.2 s of CPU per process. The tests write the bytecode cache as Python does by default
# (`__pycache__/` is git-ignored) and the subprocesses they start read and write it too.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Provider SDKs must never find a real key or endpoint in the developer's environment.
for _var in (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "HERMES_HOME",
):
    os.environ.pop(_var, None)


@pytest.fixture
def hermes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HERMES_HOME for the test, exported for code that reads the environment."""
    home = tmp_path / "hermes_home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    return home


def pg_url() -> str | None:
    """The PostgreSQL URL for store tests, or None where no server is configured."""
    return os.environ.get("HERMES_TEST_PG_URL") or None


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """A test that ran the CLI leaves logging as it found it: the handlers `configure_logging`
    installed go, and quietened library loggers get their levels back (else a later test's
    `caplog` hears nothing from them)."""
    yield
    from agent.logging_setup import shutdown_logging

    shutdown_logging()


# The slow tier: modules and tests that each cost 1.5 s of CPU or more (worker processes, the
# pty chat, MCP servers, whole-session replays, big property runs). Measured per test with
# getrusage on the 2-core machine: 92 tests, two thirds of the suite's CPU. `pytest` runs the
# rest (the default, `-m "not slow"` in pyproject.toml); `pytest -m slow` runs these; `.ci/run`
# runs both. A new test that takes seconds belongs here.
SLOW_MODULES = frozenset(
    {
        "tests/agent/mcp/test_connection.py",
        "tests/integration/test_cli_fuzz.py",
        "tests/integration/test_disk_full.py",
        "tests/integration/test_http_stateless_workers.py",
        "tests/integration/test_jobs_workers.py",
        "tests/integration/test_lazy_imports.py",
        "tests/integration/test_mcp_cli.py",
        "tests/integration/test_mcp_tools.py",
        "tests/integration/test_media_window.py",
        "tests/integration/test_never_bricked.py",
        "tests/integration/test_terminal_chat_pty.py",
        "tests/integration/test_terminal_scroll_pty.py",
        "tests/integration/test_window_first_time.py",
        "tests/integration/test_workers.py",
        "tests/invariants/test_anchors_survive_recompression.py",
        "tests/invariants/test_compaction_properties.py",
        "tests/invariants/test_never_bricked.py",
        "tests/invariants/test_store_crash.py",
        "tests/scripts/test_memory_replay.py",
        "tests/scripts/test_micro_compaction_report.py",
        "tests/scripts/test_replay.py",
        "tests/scripts/test_replay_demo.py",
        "tests/scripts/test_replay_table.py",
    }
)
SLOW_TESTS = frozenset(
    {
        "tests/agent/tools/test_sandbox_corpus.py::test_the_sandbox_alone_contains_every_command",
        "tests/agent/tools/test_sandbox_corpus.py::test_default_settings_for_an_unattended_principal",
        "tests/cli/test_error_boundary.py::test_a_read_only_home_is_one_sentence_per_command",
        "tests/gateway/test_scheduler.py::test_a_failing_job_tells_its_owner_and_cron_list_shows_the_error",
        "tests/integration/test_http_hardening.py::test_random_bodies_never_5xx_never_200_with_an_error_never_store_refused_input",
        "tests/integration/test_http_stateless.py::test_fifty_stateless_requests_keep_one_session",
        "tests/integration/test_http_stateless.py::test_a_long_stateless_conversation_gets_the_compacted_set",
        "tests/integration/test_setup_doctor.py::test_setup_gives_up_cleanly_after_three_dead_urls",
        "tests/integration/test_tight_window.py::test_a_32k_session_compacts_at_most_once_in_ten_turns",
        "tests/state/test_faults.py::test_the_integrity_check_does_not_keep_a_big_file_in_memory",
        "tests/state/test_owners.py::test_no_read_ever_returns_another_owners_session",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tier (`SLOW_MODULES`, `SLOW_TESTS`: a test id without its parameters)."""
    for item in items:
        module, _, name = item.nodeid.partition("::")
        if module in SLOW_MODULES or f"{module}::{name.partition('[')[0]}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
