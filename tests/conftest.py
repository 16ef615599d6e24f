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
