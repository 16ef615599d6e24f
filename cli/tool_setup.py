"""The terminal and file tools' surroundings from config: the workspace and how commands start.

The workspace is never the home directory (or an ancestor of it, `/` included) nor HERMES_HOME
itself: started there without `tools.workspace`, the tools work in HERMES_HOME/workspace and the
operator is told in one line; a `tools.workspace` naming one of them is a config error. Commands get a scrubbed
environment and the sandbox setting; `bwrap` must work at start-up, `auto` says once when it
cannot (unattended commands will then be refused).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.config import HermesConfig
from agent.errors import ConfigError
from agent.tools import sandbox
from agent.tools.sandbox import INSTALL_HINT, TerminalSettings, command_environment
from agent.tools.workspace import Workspace

__all__ = ["ToolSetup", "is_too_wide", "tool_setup"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSetup:
    """The workspace, the terminal settings, and what the operator should be told once."""

    workspace: Workspace
    terminal: TerminalSettings
    notices: tuple[str, ...] = ()


def is_too_wide(root: Path, home: Path, hermes_home: Path) -> bool:
    """Whether `root` is `/`, the home or one of its ancestors, or HERMES_HOME itself (a
    workspace may hold HERMES_HOME deeper down: it stays private and hidden from commands)."""
    real = Path(os.path.realpath(root))
    real_home = Path(os.path.realpath(home))
    if real == Path("/") or real == real_home or real in real_home.parents:
        return True
    return real == Path(os.path.realpath(hermes_home))


def tool_setup(
    config: HermesConfig,
    home: Path,
    environ: Mapping[str, str],
    given: Path | None,
    *,
    cwd: Path | None = None,
) -> ToolSetup:
    """Build the workspace and terminal settings; ConfigError for a mistake that must stop."""
    user_home = Path(environ.get("HOME") or Path.home())
    notices: list[str] = []
    configured = given or (
        Path(config.tools.workspace).expanduser() if config.tools.workspace else None
    )
    if configured is not None:
        if is_too_wide(configured, user_home, home):
            raise ConfigError(
                f"tools.workspace is {configured}: your home directory (or above it) or "
                f"HERMES_HOME ({home}); the workspace must be a project directory (tools may "
                "write anywhere in it)",
                key="tools.workspace",
            )
        root = configured
    else:
        root = cwd or Path.cwd()
        if is_too_wide(root, user_home, home):
            root = home / "workspace"
            notices.append(
                f"Note: started in {cwd or Path.cwd()}, so the tools work in {root} "
                "(set tools.workspace, or start hermes in a project directory)."
            )
    workspace = Workspace.at(root, home=user_home, hermes_home=home)
    return ToolSetup(
        workspace=workspace,
        terminal=_terminal_settings(config, home, environ, notices),
        notices=tuple(notices),
    )


def _terminal_settings(
    config: HermesConfig, home: Path, environ: Mapping[str, str], notices: list[str]
) -> TerminalSettings:
    terminal = config.tools.terminal
    problem = sandbox.bwrap_problem() if terminal.sandbox != "none" else None
    if terminal.sandbox == "bwrap" and problem is not None:
        raise ConfigError(
            f"tools.terminal.sandbox is bwrap, but {problem}; {INSTALL_HINT}",
            key="tools.terminal.sandbox",
        )
    if terminal.sandbox == "auto" and problem is not None and "terminal" in config.tools.enabled:
        notices.append(
            f"Note: {problem}, so commands run without a sandbox where you approve them and are "
            f"refused where nobody can; {INSTALL_HINT}."
        )
    return TerminalSettings(
        sandbox=terminal.sandbox,
        network=terminal.network,
        env=command_environment(environ, terminal.env),
        hidden=(home,),
        bwrap_missing=problem,
    )
