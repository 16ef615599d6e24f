"""How commands start: the scrubbed environment, the bwrap argv, and bubblewrap for real.

The bubblewrap tests run a harmless command inside the sandbox and check what
docs/security-model.md promises: the workspace is writable, the rest of the filesystem is
read-only, the home and HERMES_HOME are empty, and there is no network. They skip, saying why,
where bubblewrap is not installed or cannot create namespaces (`.ci/run` installs it).
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from agent.tools.sandbox import (
    TerminalSettings,
    bwrap_problem,
    command_argv,
    command_environment,
)
from agent.tools.terminal import run_command

PROBLEM = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"bwrap unusable: {PROBLEM}")


def test_environment_is_an_allowlist() -> None:
    """Only PATH, HOME, LANG, TERM and the names passed in survive; absent names are skipped."""
    environ = {"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "sk-x", "EXTRA": "1", "TZ": "UTC"}
    assert command_environment(environ, ["EXTRA", "MISSING"]) == {
        "PATH": "/bin",
        "HOME": "/h",
        "EXTRA": "1",
    }


def test_without_a_sandbox_the_command_goes_to_bash(tmp_path: Path) -> None:
    """`none`: the shell and `-c COMMAND`, nothing in front."""
    settings = TerminalSettings(shell="/bin/bash")
    argv = command_argv(
        "ls", settings, cwd=tmp_path, workspace=tmp_path, home=tmp_path, sandboxed=False
    )
    assert argv == ["/bin/bash", "-c", "ls"]


def test_bwrap_argv_binds_the_workspace_last_and_hides_home(tmp_path: Path) -> None:
    """The workspace bind comes after the tmpfs over the home, so a workspace in ~ survives."""
    home, workspace = tmp_path / "home", tmp_path / "home" / "proj"
    settings = TerminalSettings(shell="/bin/bash", sandbox="bwrap", hidden=(tmp_path / "hh",))
    argv = command_argv(
        "ls", settings, cwd=workspace, workspace=workspace, home=home, sandboxed=True
    )
    assert argv[-4:] == ["--", "/bin/bash", "-c", "ls"]
    assert "--share-net" not in argv and "--unshare-all" in argv
    assert argv.index(str(home)) < argv.index("--bind") and str(tmp_path / "hh") in argv
    assert argv[argv.index("--ro-bind") + 1 : argv.index("--ro-bind") + 3] == ["/", "/"]
    networked = TerminalSettings(sandbox="bwrap", network=True)
    assert "--share-net" in command_argv(
        "ls", networked, cwd=workspace, workspace=workspace, home=home, sandboxed=True
    )
    assert "--die-with-parent" in argv and "--new-session" in argv


def _read(path: Path) -> str:
    return path.read_text()


def _exists(path: Path) -> bool:
    return path.exists()


async def _in_sandbox(command: str, root: Path, *, network: bool = False) -> tuple[int | None, str]:
    home, workspace, hermes_home = root / "home", root / "home" / "ws", root / "hermes"
    for d in (workspace, hermes_home):
        d.mkdir(parents=True, exist_ok=True)
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text("private")
    (hermes_home / "config.yaml").write_text("api_key: sk-x")
    settings = TerminalSettings(
        sandbox="bwrap", network=network, hidden=(hermes_home,), env={"PATH": "/usr/bin:/bin"}
    )
    argv = command_argv(
        command, settings, cwd=workspace, workspace=workspace, home=home, sandboxed=True
    )
    result = await run_command(
        argv, cwd=workspace, env=dict(settings.env), timeout_s=20.0, max_chars=10_000
    )
    return result.exit_code, result.output


@needs_bwrap
async def test_the_workspace_is_writable_and_the_rest_read_only(tmp_path: Path) -> None:
    """Inside bwrap a file can be made in the workspace, but not in /usr or /etc."""
    _, out = await _in_sandbox(
        "echo ok > made.txt && cat made.txt; touch /usr/hermes-probe 2>&1; echo x >> /etc/hosts 2>&1",
        tmp_path,
    )
    assert out.startswith("ok\n") and out.count("Read-only file system") == 2
    assert _read(tmp_path / "home" / "ws" / "made.txt") == "ok\n"
    assert not _exists(Path("/usr/hermes-probe"))


@needs_bwrap
async def test_home_and_hermes_home_are_hidden(tmp_path: Path) -> None:
    """~/.ssh and HERMES_HOME's config are not there inside the sandbox."""
    _, out = await _in_sandbox(
        f"ls -A {tmp_path / 'home'}; cat {tmp_path / 'home' / '.ssh' / 'id_rsa'} 2>&1;"
        f" cat {tmp_path / 'hermes' / 'config.yaml'} 2>&1",
        tmp_path,
    )
    assert "private" not in out and "sk-x" not in out
    assert out.splitlines()[0] == "ws" and out.count("No such file or directory") == 2


@needs_bwrap
async def test_there_is_no_network_unless_allowed(tmp_path: Path) -> None:
    """A listening loopback port outside is unreachable from inside; `network: true` reaches it."""
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    probe = f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo open || echo closed"
    try:
        _, cut_off = await _in_sandbox(probe, tmp_path)
        _, allowed = await _in_sandbox(probe, tmp_path, network=True)
    finally:
        server.close()
        await server.wait_closed()
    assert cut_off.strip().endswith("closed") and allowed.strip().endswith("open")


@needs_bwrap
async def test_proc_ppid_is_the_sandbox_not_hermes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cd /proc/$PPID && cat environ` (issue 32) finds the sandbox's own init and the scrubbed
    environment: Hermes's DATABASE_URL and its password are nowhere in /proc."""
    password = "planted-proc-password-4242"
    monkeypatch.setenv("DATABASE_URL", f"postgresql://hermes:{password}@127.0.0.1/hermes")
    code, out = await _in_sandbox(
        "cd /proc/$PPID && tr '\\0' '\\n' < environ; tr '\\0' ' ' < cmdline; echo;"
        " grep -ls planted-proc /proc/[0-9]*/environ; ls /proc | grep -c '^[0-9]'",
        tmp_path,
    )
    assert code == 0, out
    assert password not in out and "DATABASE_URL" not in out
    lines = out.splitlines()
    assert "PATH=/usr/bin:/bin" in lines and lines[-2].split()[0].endswith("bwrap")
    assert int(lines[-1]) < 10  # only the sandbox's own processes are visible


@needs_bwrap
async def test_a_background_server_does_not_outlive_its_command(tmp_path: Path) -> None:
    """`python3 -m http.server … &` (issue 32) answers while the command runs, and is gone the
    moment it ends: the port refuses connections and no process of it is left."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = (
        f"python3 -m http.server {port} --bind 127.0.0.1 > /dev/null 2>&1 &"
        f" for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null"
        " && { echo up; break; }; sleep 0.05; done"
    )
    code, out = await _in_sandbox(command, tmp_path, network=True)
    assert code == 0 and out.strip() == "up", out
    assert await _refused_within(port, timeout_s=3.0)


async def _refused_within(port: int, *, timeout_s: float) -> bool:
    """Whether connecting to `port` is refused before `timeout_s` (the server is gone)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except ConnectionRefusedError:
            return True
        writer.close()
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)


@needs_bwrap
async def test_run_is_empty_dev_read_only_and_scratch_capped(tmp_path: Path) -> None:
    """Sockets in /run (systemd, docker) are out of reach, /dev takes no new files, /tmp is
    capped (an endless write stops at the cap instead of filling memory), and /etc/shadow,
    which root could read even without capabilities, cannot be read."""
    _, out = await _in_sandbox(
        "ls -A /run | wc -l; echo x > /dev/sdb; head -c 600000000 /dev/zero > /tmp/fill;"
        " stat -c %s /tmp/fill; cat /etc/shadow 2>/dev/null | wc -c",
        tmp_path,
    )
    lines = out.splitlines()
    assert lines[0] == "0" and "Read-only file system" in lines[1]
    assert "No space left on device" in out
    assert int(lines[-2]) <= 512 * 1024 * 1024 and lines[-1] == "0"
