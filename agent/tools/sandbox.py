"""How a command is started: the scrubbed environment, and the optional bubblewrap sandbox.

Commands never inherit Hermes's environment (which holds API keys and bot tokens): they get
PATH, HOME, LANG and TERM, plus the variables `tools.terminal.env` names. With
`tools.terminal.sandbox: bwrap` the command runs under bubblewrap: the whole filesystem
read-only, the workspace read-write, a fresh `/tmp`, the home directory and HERMES_HOME hidden
behind empty tmpfs mounts (so `~/.ssh` and our config cannot be read), new PID, IPC, UTS and
cgroup namespaces, and no network unless `tools.terminal.network` allows it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, assert_never

__all__ = [
    "BASE_ENV",
    "SandboxMode",
    "TerminalSettings",
    "bwrap_problem",
    "command_argv",
    "command_environment",
]

SandboxMode = Literal["none", "bwrap"]
BASE_ENV = ("PATH", "HOME", "LANG", "TERM")
"""The variables every command gets (when they are set for Hermes)."""
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalSettings:
    """How the terminal tool starts commands (from `tools.terminal`)."""

    shell: str | None = None
    """The shell that runs `-c COMMAND`; None: bash from PATH (tests pass a recording stand-in)."""
    sandbox: SandboxMode = "none"
    network: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: command_environment(os.environ))
    """The complete environment of every command (already scrubbed; the runtime passes the one
    built from the environment `hermes` was started with)."""
    hidden: tuple[Path, ...] = ()
    """Directories the sandbox covers with an empty tmpfs besides the home (HERMES_HOME)."""


def command_environment(environ: Mapping[str, str], passed: Sequence[str] = ()) -> dict[str, str]:
    """The allowlisted subset of `environ`: PATH, HOME, LANG, TERM and the `passed` names."""
    names = (*BASE_ENV, *passed)
    return {name: environ[name] for name in names if name in environ}


def command_argv(
    command: str, settings: TerminalSettings, *, cwd: Path, workspace: Path, home: Path
) -> list[str]:
    """The argv that runs `command`: `bash -c`, or the same inside bubblewrap."""
    shell = settings.shell or shutil.which("bash") or "/bin/sh"
    inner = [shell, "-c", command]
    match settings.sandbox:
        case "none":
            return inner
        case "bwrap":
            return [*_bwrap_prefix(settings, cwd=cwd, workspace=workspace, home=home), *inner]
        case unreachable:
            assert_never(unreachable)


def bwrap_problem() -> str | None:
    """Why the bubblewrap sandbox cannot run here, or None when it works (probed once)."""
    return _probe(shutil.which("bwrap"))


@functools.cache
def _probe(bwrap: str | None) -> str | None:
    if bwrap is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start ({type(exc).__name__})"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot create namespaces here: {detail[-1] if detail else 'failed'}"
    return None


def _bwrap_prefix(
    settings: TerminalSettings, *, cwd: Path, workspace: Path, home: Path
) -> list[str]:
    argv = [
        shutil.which("bwrap") or "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        *(["--share-net"] if settings.network else []),
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--tmpfs", "/var/tmp",
        "--tmpfs", "/dev/shm",
    ]  # fmt: skip
    for hidden in (home, *settings.hidden):
        if hidden != Path("/"):
            argv += ["--tmpfs", str(hidden)]
    # Bound last, so a workspace inside the (hidden) home is still there, read-write.
    argv += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd), "--"]
    return argv
