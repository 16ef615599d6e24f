"""Where a command runs: the scrubbed environment, the bubblewrap sandbox, and the choice between them.

Commands never inherit Hermes's environment (which holds API keys, bot tokens and DATABASE_URL):
they get PATH, HOME, LANG and TERM, plus the variables `tools.terminal.env` names.

Under bubblewrap the whole filesystem is read-only, the workspace read-write, `/tmp` fresh, the
home directory and HERMES_HOME empty tmpfs mounts (so `~/.ssh` and our config cannot be read),
PID, IPC, UTS and cgroup namespaces new (so `/proc/$PPID` is the sandbox's own init, never
Hermes), and there is no network unless `tools.terminal.network` allows it. When the command's
shell exits, the sandbox's init exits and the kernel kills everything left in its PID namespace:
no background process outlives its turn.

`tools.terminal.sandbox` (`place_command` decides, a pure function):

- `auto` (default): every command runs in the sandbox. Where someone can approve (the terminal
  chat) the model may ask to run one outside it, and the person is asked; where nobody can
  approve that is refused. Without bubblewrap, unattended commands are refused with how to
  install it; the terminal chat runs them on the host, under the policy and approvals as before.
- `bwrap`: always the sandbox, never outside it (start-up fails without bubblewrap).
- `none`: the explicit opt-out: commands run on the host, guarded by the shell policy alone.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias, assert_never

__all__ = [
    "BASE_ENV",
    "HIDDEN_LIMIT_BYTES",
    "INSTALL_HINT",
    "SCRATCH_LIMITS_BYTES",
    "SYSTEM_SECRETS",
    "Placement",
    "SandboxMode",
    "TerminalSettings",
    "bwrap_problem",
    "command_argv",
    "command_environment",
    "mount_order",
    "place_command",
]

SandboxMode: TypeAlias = Literal["auto", "bwrap", "none"]
BASE_ENV = ("PATH", "HOME", "LANG", "TERM")
"""The variables every command gets (when they are set for Hermes)."""
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install "
    "bubblewrap`) and check it with `hermes doctor`, or opt out with tools.terminal.sandbox: none"
)
_PROBE_TIMEOUT_S = 10.0
_MIB = 1024 * 1024
SCRATCH_LIMITS_BYTES = {
    Path("/tmp"): 512 * _MIB,
    Path("/var/tmp"): 64 * _MIB,
    Path("/dev/shm"): 64 * _MIB,
}
"""The sandbox's fresh scratch directories are memory: each is capped (and /dev is read-only),
so `yes > /tmp/x` or `cat /dev/urandom > /dev/sdb` cannot eat the machine's RAM."""
HIDDEN_LIMIT_BYTES = 128 * _MIB
"""The empty home and HERMES_HOME (caches written there vanish with the command)."""
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                  "/etc/ssl/private", "/etc/ssh/ssh_host_*_key")  # fmt: skip
"""Readable by root even without capabilities: replaced by empty files and directories."""
_RESOLVER_DIR = Path("/run/systemd/resolve")


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalSettings:
    """How the terminal tool starts commands (from `tools.terminal`)."""

    shell: str | None = None
    """The shell that runs `-c COMMAND`; None: bash from PATH (tests pass a recording stand-in)."""
    sandbox: SandboxMode = "auto"
    network: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: command_environment(os.environ))
    """The complete environment of every command (already scrubbed; the runtime passes the one
    built from the environment `hermes` was started with)."""
    hidden: tuple[Path, ...] = ()
    """Directories the sandbox covers with an empty tmpfs besides the home (HERMES_HOME)."""
    bwrap_missing: str | None = field(default_factory=lambda: bwrap_problem())
    """Why bubblewrap cannot run here; None when it works (probed once per process)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Where one command runs, or why it does not."""

    where: Literal["sandbox", "host", "refuse"]
    ask: str | None = None
    """Run only after a person approves this (running outside the sandbox); None: no question."""
    reason: str = ""
    """For a refusal: the sentence that goes back to the model."""


def place_command(settings: TerminalSettings, *, can_ask: bool, outside: bool) -> Placement:
    """Sandbox, host or refusal for one command (see the module docstring); pure."""
    missing = settings.bwrap_missing
    match settings.sandbox:
        case "none":
            return Placement(where="host")
        case "bwrap":
            if outside:
                return Placement(
                    where="refuse",
                    reason="commands always run in the sandbox here (tools.terminal.sandbox: "
                    "bwrap); run it without outside_sandbox",
                )
            if missing is not None:
                return Placement(where="refuse", reason=f"{missing}; {INSTALL_HINT}")
            return Placement(where="sandbox")
        case "auto":
            if missing is not None:
                if can_ask:
                    return Placement(where="host")  # a person is watching and approving
                return Placement(
                    where="refuse",
                    reason=f"nobody can approve here, so commands run only in the bubblewrap "
                    f"sandbox, and {missing}; {INSTALL_HINT}",
                )
            if not outside:
                return Placement(where="sandbox")
            if not can_ask:
                return Placement(
                    where="refuse",
                    reason="running outside the sandbox needs a person's approval and nobody "
                    "can approve here; run it in the sandbox (without outside_sandbox)",
                )
            return Placement(where="host", ask="outside the sandbox")
        case unreachable:
            assert_never(unreachable)


def command_environment(environ: Mapping[str, str], passed: Sequence[str] = ()) -> dict[str, str]:
    """The allowlisted subset of `environ`: PATH, HOME, LANG, TERM and the `passed` names."""
    names = (*BASE_ENV, *passed)
    return {name: environ[name] for name in names if name in environ}


def command_argv(
    command: str,
    settings: TerminalSettings,
    *,
    cwd: Path,
    workspace: Path,
    home: Path,
    sandboxed: bool,
) -> list[str]:
    """The argv that runs `command`: `bash -c`, or the same inside bubblewrap."""
    shell = settings.shell or shutil.which("bash") or "/bin/sh"
    inner = [shell, "-c", command]
    if not sandboxed:
        return inner
    return [*_bwrap_prefix(settings, cwd=cwd, workspace=workspace, home=home), *inner]


def bwrap_problem() -> str | None:
    """Why the bubblewrap sandbox cannot run here, or None when it works (probed once)."""
    return _probe(shutil.which("bwrap"))


@functools.cache
def _probe(bwrap: str | None) -> str | None:
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start ({type(exc).__name__})"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot create namespaces here: {detail[-1] if detail else 'failed'}"
    return None


_Mount: TypeAlias = tuple[Path, Literal["bind", "tmpfs"]]


@functools.cache
def _tmpfs_size_works(bwrap: str) -> bool:
    """bubblewrap 0.7+ caps a tmpfs with `--size`; older ones get uncapped scratch."""
    argv = [bwrap, "--ro-bind", "/", "/", "--size", "4096", "--tmpfs", "/tmp", "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _bwrap_prefix(
    settings: TerminalSettings, *, cwd: Path, workspace: Path, home: Path
) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    sized = _tmpfs_size_works(bwrap)
    argv = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        *(["--share-net"] if settings.network else []),
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--remount-ro", "/dev",
        "--proc", "/proc",
        # Unix sockets (systemd, D-Bus, docker.sock) live in /run; a socket on a read-only
        # mount still accepts connections, so /run is emptied.
        *(["--size", str(HIDDEN_LIMIT_BYTES)] if sized else []), "--tmpfs", "/run",
        *_hidden_system_files(network=settings.network),
    ]  # fmt: skip
    for path, kind in mount_order(workspace, hidden=(home, *settings.hidden)):
        match kind:
            case "bind":
                argv += ["--bind", str(path), str(path)]
            case "tmpfs":
                limit = SCRATCH_LIMITS_BYTES.get(path, HIDDEN_LIMIT_BYTES)
                argv += [*(["--size", str(limit)] if sized else []), "--tmpfs", str(path)]
            case unreachable:
                assert_never(unreachable)
    argv += ["--chdir", str(cwd), "--"]
    return argv


def _hidden_system_files(*, network: bool) -> list[str]:
    argv: list[str] = []
    for pattern in SYSTEM_SECRETS:
        for path in (
            sorted(Path("/").glob(pattern.lstrip("/"))) if "*" in pattern else [Path(pattern)]
        ):
            if path.is_dir():
                argv += ["--tmpfs", str(path)]
            elif path.exists():
                argv += ["--ro-bind", "/dev/null", str(path)]
    if network and _RESOLVER_DIR.is_dir():  # /etc/resolv.conf often points here
        argv += ["--ro-bind", str(_RESOLVER_DIR), str(_RESOLVER_DIR)]
    return argv


def mount_order(workspace: Path, *, hidden: Sequence[Path]) -> list[_Mount]:
    """The writable workspace and the empty mounts, outermost first: a workspace inside the
    hidden home is still there, and a home or HERMES_HOME inside the workspace stays hidden (at
    the same path, hiding wins)."""
    scratch = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")]
    mounts: list[_Mount] = [(p, "tmpfs") for p in scratch]
    mounts += [(p, "tmpfs") for p in dict.fromkeys(hidden) if p != Path("/")]
    mounts.append((workspace, "bind"))
    return sorted(mounts, key=lambda m: (len(m[0].parts), m[1] == "tmpfs"))
