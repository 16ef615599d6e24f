"""Runtime wiring of the security pieces: scrubbed command environment, workspace, sandbox check."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import ConfigError
from cli.runtime import Runtime
from sim.llm_server import FakeLLM
from tests.gateway.harness import make_config


async def test_the_tool_context_gets_the_scrubbed_environment_and_workspace(
    tmp_path: Path,
) -> None:
    """Commands get PATH/HOME/LANG/TERM plus tools.terminal.env; tools work in tools.workspace."""
    environ = {"PATH": "/bin", "HOME": str(tmp_path), "OPENAI_API_KEY": "sk-x", "MODE": "dev"}
    async with FakeLLM() as llm:
        config = make_config(
            llm,
            tmp_path / "state.db",
            tools={
                "enabled": ["terminal"],
                "workspace": str(tmp_path / "ws"),
                "terminal": {"env": ["MODE"]},
            },
        )
        async with await Runtime.start(config, tmp_path, environ) as runtime:
            ctx = runtime.deps.tool_context
    assert dict(ctx.terminal.env) == {"PATH": "/bin", "HOME": str(tmp_path), "MODE": "dev"}
    real = _real(tmp_path)
    assert ctx.workspace is not None and ctx.workspace.root == real / "ws"
    assert ctx.cwd == ctx.workspace.root
    assert ctx.workspace.is_private(real / "state.db")  # HERMES_HOME


def _real(path: Path) -> Path:
    return path.resolve()


async def test_a_sandbox_that_cannot_run_stops_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked for bwrap where it cannot work, Hermes refuses to start rather than run unsandboxed."""
    import agent.tools.sandbox as sandbox

    monkeypatch.setattr(sandbox, "bwrap_problem", lambda: "bubblewrap is not installed")
    async with FakeLLM() as llm:
        config = make_config(llm, tmp_path / "state.db", tools={"terminal": {"sandbox": "bwrap"}})
        with pytest.raises(ConfigError, match="tools.terminal.sandbox is bwrap, but bubblewrap"):
            await Runtime.start(config, tmp_path, {})


async def test_without_bubblewrap_auto_starts_and_says_what_it_means(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sandbox: auto` without bwrap: Hermes starts, one note says unattended commands will be
    refused and how to install it, and the tools know bwrap is missing (so they refuse)."""
    import agent.tools.sandbox as sandbox

    monkeypatch.setattr(sandbox, "bwrap_problem", lambda: "bubblewrap (bwrap) is not installed")
    async with FakeLLM() as llm:
        config = make_config(llm, tmp_path / "state.db", tools={"enabled": ["terminal"]})
        async with await Runtime.start(config, tmp_path, {}, workspace=tmp_path / "ws") as rt:
            terminal = rt.deps.tool_context.terminal
            notices = rt.notices
    assert terminal.sandbox == "auto" and terminal.bwrap_missing is not None
    assert any(
        "refused where nobody can" in n and "apt-get install bubblewrap" in n for n in notices
    )


@pytest.mark.parametrize(
    ("mode", "problem", "status"),
    [
        ("auto", None, "ok"),
        ("bwrap", None, "ok"),
        ("auto", "bubblewrap (bwrap) is not installed", "warn"),
        ("bwrap", "bubblewrap (bwrap) is not installed", "fail"),
        ("none", None, "warn"),
    ],
)
def test_doctor_checks_the_sandbox(mode: str, problem: str | None, status: str) -> None:
    """`hermes doctor`: bwrap working is ok; missing is a warning under auto (unattended
    commands are refused) and a failure under bwrap (no start); `none` is a warning."""
    from agent.config import HermesConfig
    from cli.doctor_cmd import sandbox_check

    config = HermesConfig.model_validate({"tools": {"terminal": {"sandbox": mode}}})
    check = sandbox_check(config, problem)
    assert check.status == status
    if problem is not None:
        assert "apt-get install bubblewrap" in check.fix


@pytest.mark.parametrize(("value", "allowed"), [("allow", True), ("deny", False), (True, True)])
def test_network_is_allow_or_deny(value: object, allowed: bool) -> None:
    """`tools.terminal.network: allow | deny` (true/false still read); the default is deny."""
    from agent.config import HermesConfig

    config = HermesConfig.model_validate({"tools": {"terminal": {"network": value}}})
    assert config.tools.terminal.network is allowed
    assert HermesConfig().tools.terminal.network is False
    assert HermesConfig().tools.terminal.sandbox == "auto"
