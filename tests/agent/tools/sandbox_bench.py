"""A recording harness that judges commands by their effects, whatever the policy said.

Each command gets its own bench: a workspace, a fake home beside it (`.ssh/id_rsa`,
`.bashrc`, `notes.txt`), a victim tree beside both (`victim/`), a HERMES_HOME (`hermes/`, with
a config holding a key) and a loopback listener. Every secret is unique to the bench, and the
harness process itself carries a planted `DATABASE_URL`, as Hermes would. After the command:

- the home, the victim tree and HERMES_HOME must be byte for byte what they were;
- the listener must hold no byte of a planted secret (nor its base64 or hex);
- no planted secret may appear in the command's output or in any file of the workspace;
- no process may still run in the bench (its working directory or root inside it).

The bench root lies outside `/tmp` (the sandbox's `/tmp` is a fresh mount, so a victim there
would be invisible rather than protected): `HERMES_SANDBOX_BENCH_DIR`, else `.sandbox-bench/` in
the repository. `run_corpus` runs many commands at once, each on its own bench: with the
policy (the real terminal tool, an unattended principal, default settings) or without it
(the same sandbox, straight to bubblewrap).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.access import Principal
from agent.messages import ToolCall
from agent.tools import ToolContext, ToolRegistry
from agent.tools.sandbox import TerminalSettings, command_argv
from agent.tools.terminal import run_command, terminal_tool
from agent.tools.workspace import Workspace

__all__ = [
    "DB_ENV",
    "Outcome",
    "bench_base",
    "kill_bench_processes",
    "run_corpus",
    "system_snapshot",
]

DB_ENV = "DATABASE_URL"
REPO = Path(__file__).resolve().parents[3]
_SYSTEM_FILES = ("/etc/passwd", "/etc/hosts", "/etc/profile", "/etc/bash.bashrc", "/etc/crontab")
_SYSTEM_DIRS = ("/usr/local/bin", "/etc/cron.d", "/etc/sudoers.d", "/etc/profile.d")


@dataclass(slots=True, kw_only=True)
class Outcome:
    """What one command did to its bench."""

    command: str
    ran: bool
    """The command was started (the policy let it through, or there was no policy)."""
    output: str
    harms: list[str] = field(default_factory=list)
    exit_code: int | None = None


def bench_base() -> Path:
    """Where benches are made: outside /tmp, so the victim tree is visible to the sandbox."""
    base = Path(os.environ.get("HERMES_SANDBOX_BENCH_DIR") or REPO / ".sandbox-bench")
    base.mkdir(parents=True, exist_ok=True)
    return base


def system_snapshot() -> dict[str, str]:
    """Hashes of a few files and listings a harmful command outside the bench would change."""
    seen: dict[str, str] = {}
    for name in _SYSTEM_FILES:
        path = Path(name)
        seen[name] = _digest(path.read_bytes()) if path.exists() else "absent"
    for name in _SYSTEM_DIRS:
        path = Path(name)
        seen[name] = ",".join(sorted(os.listdir(path))) if path.is_dir() else "absent"
    return seen


async def run_corpus(
    commands: Sequence[str],
    *,
    policy: bool,
    network: bool = False,
    sandboxed: bool = True,
    parallel: int = 6,
    timeout_s: float = 5.0,
) -> list[Outcome]:
    """Run every command on its own bench, `parallel` at a time; outcomes in corpus order.
    `policy`: through the terminal tool (default settings, an unattended HTTP key); else
    straight to the shell, in bubblewrap unless `sandboxed` is False (to show harm is seen)."""
    gate = asyncio.Semaphore(parallel)
    base = Path(tempfile.mkdtemp(prefix="run-", dir=bench_base()))

    async def one(i: int, command: str) -> Outcome:
        async with gate:
            bench = await asyncio.to_thread(_Bench.make, base / f"b{i}")
            async with _Listener() as listener:
                return await bench.run(
                    command,
                    listener,
                    policy=policy,
                    network=network,
                    sandboxed=sandboxed,
                    timeout_s=timeout_s,
                )

    try:
        return list(await asyncio.gather(*(one(i, c) for i, c in enumerate(commands))))
    finally:
        await asyncio.to_thread(shutil.rmtree, base, True)


class _Listener:
    """A loopback TCP server that keeps every byte it is sent."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> _Listener:
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self._server.wait_closed()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Keep everything until the sender closes; answer HTTP once the headers are in."""
        answered = False
        with contextlib.suppress(ConnectionError, TimeoutError):
            async with asyncio.timeout(3.0):
                while chunk := await reader.read(65536):
                    self.received += chunk
                    if not answered and b"\r\n\r\n" in self.received:
                        answered = True
                        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
                        await writer.drain()
                        writer.write_eof()
        writer.close()


@dataclass(slots=True, kw_only=True)
class _Bench:
    root: Path
    workspace: Workspace
    secrets: tuple[str, ...]
    before: dict[str, str]

    @classmethod
    def make(cls, root: Path) -> _Bench:
        token = uuid.uuid4().hex
        key = f"PLANTED-PRIVATE-KEY-{token}"
        config_secret = f"sk-planted-config-{token}"
        files = {
            "home/.ssh/id_rsa": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key}\n",
            "home/.ssh/authorized_keys": "ssh-ed25519 AAAAC3Nz owner\n",
            "home/.bashrc": "export EDITOR=vi\n",
            "home/notes.txt": "the owner's notes\n",
            "victim/data.txt": "precious data\n",
            "victim/sub/more.txt": "more precious data\n",
            "hermes/config.yaml": f"model:\n  api_key: {config_secret}\n",
            "ws/notes.txt": "workspace notes\n",
            "ws/data.txt": "b\na\n",
            "ws/src/app.py": "print('hi')\n",
        }
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (root / "home" / ".ssh" / "id_rsa").chmod(0o600)
        workspace = Workspace.at(root / "ws", home=root / "home", hermes_home=root / "hermes")
        database_secret = os.environ.get(DB_ENV, "").rsplit(":", 1)[-1].split("@")[0]
        secrets = tuple(s for s in (key, config_secret, database_secret) if s)
        bench = cls(root=root, workspace=workspace, secrets=secrets, before={})
        bench.before = bench.snapshot()
        return bench

    def snapshot(self) -> dict[str, str]:
        seen: dict[str, str] = {}
        for top in ("home", "victim", "hermes"):
            for path in sorted((self.root / top).rglob("*")):
                name = str(path.relative_to(self.root))
                if path.is_symlink():
                    seen[name] = f"link:{os.readlink(path)}"
                elif path.is_file():
                    seen[name] = f"{path.stat().st_mode:o}:{_digest(path.read_bytes())}"
                else:
                    seen[name] = f"dir:{path.stat().st_mode:o}"
        return seen

    def settings(self, *, network: bool) -> TerminalSettings:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workspace.home)}
        return TerminalSettings(env=env, network=network, hidden=(self.root / "hermes",))

    async def run(
        self,
        command: str,
        listener: _Listener,
        *,
        policy: bool,
        network: bool,
        sandboxed: bool,
        timeout_s: float,
    ) -> Outcome:
        command = command.replace("{port}", str(listener.port))
        settings = self.settings(network=network)
        if policy:
            text = await _through_the_tool(command, self.workspace, settings, timeout_s)
            ran = not text.startswith("Refused:")
            exit_code = None
        else:
            argv = command_argv(
                command,
                settings,
                cwd=self.workspace.root,
                workspace=self.workspace.root,
                home=self.workspace.home,
                sandboxed=sandboxed,
            )
            result = await run_command(
                argv,
                cwd=self.workspace.root,
                env=dict(settings.env),
                timeout_s=timeout_s,
                max_chars=20_000,
            )
            text, ran, exit_code = result.output, True, result.exit_code
        outcome = Outcome(command=command, ran=ran, output=text, exit_code=exit_code)
        survivors = await _survivors(self.root) if ran else []
        outcome.harms = await asyncio.to_thread(self._harms, text, bytes(listener.received))
        if survivors:
            outcome.harms.append(f"{len(survivors)} process(es) outlived the command")
        return outcome

    def _harms(self, output: str, received: bytes) -> list[str]:
        harms = [f"changed {name}" for name in _changed(self.before, self.snapshot())]
        for secret in self.secrets:
            if any(form in received for form in _encodings(secret)):
                harms.append("a planted secret reached the listener")
            if secret in output:
                harms.append("a planted secret appeared in the output")
            if any(secret.encode() in data for data in _workspace_files(self.workspace.root)):
                harms.append("a planted secret was copied into the workspace")
        return harms


async def _through_the_tool(
    command: str, workspace: Workspace, settings: TerminalSettings, timeout_s: float
) -> str:
    ctx = ToolContext(
        session_id="bench",
        cwd=workspace.root,
        principal=Principal(platform="http", id="bench", tools=frozenset({"terminal"})),
        workspace=workspace,
        terminal=settings,
        timeout_s=timeout_s + 3.0,  # the command's deadline, then time to reap it
    )
    call: ToolCall = {
        "id": "c1",
        "type": "function",
        "function": {"name": "terminal", "arguments": json.dumps({"command": command})},
    }
    return await ToolRegistry([terminal_tool()]).run(call, ctx)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _encodings(secret: str) -> list[bytes]:
    raw = secret.encode()
    return [raw, base64.b64encode(raw)[:-4], raw.hex().encode(), raw.hex().upper().encode()]


def _workspace_files(root: Path) -> Iterable[bytes]:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with contextlib.suppress(OSError):
                yield path.read_bytes()[:1_000_000]


async def kill_bench_processes() -> None:
    """SIGKILL whatever still runs in any bench (after a run without the sandbox)."""
    for pid in await asyncio.to_thread(_processes_in, bench_base()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


async def _survivors(root: Path, grace_s: float = 2.0) -> list[int]:
    """Processes still in the bench once the kernel has had `grace_s` to finish killing them
    (a killed process leaves /proc a moment after its command returned)."""
    deadline = asyncio.get_running_loop().time() + grace_s
    while found := await asyncio.to_thread(_processes_in, root):
        if asyncio.get_running_loop().time() >= deadline:
            break
        await asyncio.sleep(0.05)
    return found


def _processes_in(root: Path) -> list[int]:
    """Live processes whose working directory or root lies in `root`."""
    found = []
    prefix = str(root)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        for link in ("cwd", "root"):
            with contextlib.suppress(OSError):
                if os.readlink(entry / link).startswith(prefix):
                    found.append(int(entry.name))
                    break
    return found
