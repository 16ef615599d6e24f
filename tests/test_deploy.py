"""The service recipes in deploy/: a systemd unit systemd accepts, a compose file and a
Dockerfile that fit the code. Nothing is built or started (no container engine runs here).

Contracts: systemd.service(5)/systemd.exec(5) (`systemd-analyze verify` where installed), the
Compose file format (https://docs.docker.com/reference/compose-file/) and Dockerfile reference
(https://docs.docker.com/reference/dockerfile/).
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from agent.config import load_config

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
DRAIN_S = 45


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(DEPLOY / "hermes.service", encoding="utf-8")
    return parser


def _compose() -> dict[str, Any]:
    data = YAML(typ="safe").load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_the_unit_restarts_on_failure_and_drains_on_sigterm() -> None:
    """The gateway restarts after a crash, gets SIGTERM to drain, and more time to do so than
    the default shutdown_timeout_s; it starts after the network is up."""
    unit = _unit()
    service = unit["Service"]
    assert service["ExecStart"].endswith("hermes gateway run")
    assert service["Restart"] == "on-failure" and service["KillSignal"] == "SIGTERM"
    default_drain = load_config(ROOT / "config.example.yaml").gateway.shutdown_timeout_s
    assert int(service["TimeoutStopSec"]) == DRAIN_S > default_drain
    assert service["Environment"].startswith("HERMES_HOME=")
    assert service["User"] != "root" and "network-online.target" in unit["Unit"]["After"]
    assert unit["Install"]["WantedBy"] == "multi-user.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """`systemd-analyze verify` finds nothing wrong (ExecStart pointed at a binary that exists
    here, since /opt/hermes is not installed on a test machine)."""
    text = (DEPLOY / "hermes.service").read_text(encoding="utf-8")
    executable = shutil.which("true") or "/bin/true"
    copy = tmp_path / "hermes.service"
    copy.write_text(re.sub(r"^ExecStart=\S+", f"ExecStart={executable}", text, flags=re.M))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "hermes.service" not in result.stderr, result.stderr


def test_compose_runs_hermes_after_a_healthy_postgres() -> None:
    """Two services; Hermes waits for PostgreSQL's health check, keeps HERMES_HOME on a volume,
    publishes its ports on loopback only and has the drain time to stop."""
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"hermes", "postgres"}
    hermes, postgres = services["hermes"], services["postgres"]
    assert hermes["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert hermes["environment"]["HERMES_HOME"] == "/data"
    assert any(v.startswith("hermes-home:/data") for v in hermes["volumes"])
    assert set(compose["volumes"]) == {"pgdata", "hermes-home"}
    assert all(p.startswith("127.0.0.1:") for p in hermes["ports"])
    assert hermes["stop_signal"] == "SIGTERM" and hermes["stop_grace_period"] == f"{DRAIN_S}s"
    build = hermes["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_the_compose_config_is_valid_and_points_at_the_compose_database() -> None:
    """deploy/config.compose.yaml passes Hermes' own validation, and its state.url is the
    compose PostgreSQL with the same user, database and password."""
    config = load_config(DEPLOY / "config.compose.yaml")
    env = _compose()["services"]["postgres"]["environment"]
    expected = (
        f"postgresql+asyncpg://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}"
        f"@postgres:5432/{env['POSTGRES_DB']}"
    )
    assert config.state.url == expected
    assert config.gateway.metrics.enabled and config.gateway.metrics.port == 9464
    ports = {p.rsplit(":", 1)[1] for p in _compose()["services"]["hermes"]["ports"]}
    assert ports == {str(config.gateway.http.port), str(config.gateway.metrics.port)}


def test_the_dockerfile_copies_what_exists_and_runs_the_gateway_unprivileged() -> None:
    """Every COPY source is in the repository, dependencies install with the constraints, the
    image runs as a non-root user with SIGTERM as its stop signal."""
    lines = [
        line.strip()
        for line in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    instructions = [line.split(maxsplit=1)[0] for line in lines]
    assert instructions[0] == "FROM" and lines[0].startswith("FROM python:3.11")
    for line in lines:
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
    assert any("pip install" in line and "-c constraints.txt" in line for line in lines)
    user = next(line for line in lines if line.startswith("USER "))
    assert user.split()[1] not in ("root", "0")
    assert "STOPSIGNAL SIGTERM" in lines
    assert lines[-1] == 'CMD ["hermes", "gateway", "run"]'
    packages = re.findall(r"include = \[(.*?)\]", (ROOT / "pyproject.toml").read_text())[0]
    copied = {line.split()[1] for line in lines if line.startswith("COPY ") and "./" in line}
    for package in re.findall(r'"(\w+)\*"', packages):
        assert package in copied, f"the image misses the {package} package"
