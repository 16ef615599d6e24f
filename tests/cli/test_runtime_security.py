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
