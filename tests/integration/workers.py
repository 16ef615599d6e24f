"""Real `hermes gateway run` processes sharing one store, for the several-workers tests.

Each worker gets its own HERMES_HOME (config.yaml, logs) and HTTP port; all point at the same
`state.url` and at the test's FakeLLM (OpenAI wire: the lighter SDK to import). A worker is
ready when it printed its "hermes gateway running" line and its port accepts connections;
every wait has a deadline, and `stop_all` kills whatever is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

from gateway.http import SESSION_HEADER
from tests.gateway.harness import wait_listening

__all__ = [
    "KEY",
    "Worker",
    "ask",
    "hermes_command",
    "running_workers",
    "worker_config",
    "worker_env",
]

KEY = "sk-workers-test"
READY_LINE = "hermes gateway running"
START_S = 30.0
"""Two cold Python processes importing the runtime on a loaded 2-core machine."""
REQUEST_S = 30.0


def worker_config(
    *, llm_url: str, db_url: str, port: int, lease_ttl_s: float, **sections: dict[str, Any]
) -> dict[str, Any]:
    """A worker's config.yaml as a dict; `sections` merge over the defaults below."""
    data: dict[str, Any] = {
        "model": {
            "provider": "custom",
            "default": "test-model",
            "base_url": llm_url,
            "api_key": "test-key",
            "context_length": 16_000,
            "max_retries": 0,
            "timeout_s": 60.0,
        },
        "state": {"url": db_url, "lease_ttl_s": lease_ttl_s, "lock_timeout_s": 20.0},
        "tools": {"enabled": []},
        "auxiliary": {"compression": {"timeout_s": 20.0}},
        "gateway": {
            "shutdown_timeout_s": 5.0,
            "http": {"enabled": True, "port": port, "api_key": KEY},
        },
    }
    for name, values in sections.items():
        data[name] = _merge(data.get(name, {}), values)
    return data


@dataclass(slots=True)
class Worker:
    """One `hermes gateway run` process."""

    index: int
    home: Path
    port: int
    proc: asyncio.subprocess.Process | None = None
    stderr: list[str] = field(default_factory=list)
    _drain: asyncio.Task[None] | None = None
    _clients: list[openai.AsyncOpenAI] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def client(self) -> openai.AsyncOpenAI:
        """A client for this worker, closed when the worker stops (an open transport left for
        the garbage collector breaks a later test's event loop)."""
        client = openai.AsyncOpenAI(
            api_key=KEY, base_url=self.base_url, max_retries=0, timeout=REQUEST_S
        )
        self._clients.append(client)
        return client

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *hermes_command(),
            "gateway",
            "run",
            env=worker_env(self.home),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )

    async def wait_ready(self) -> None:
        """Until the readiness line is printed and the port accepts; fails with the output."""
        assert self.proc is not None and self.proc.stderr is not None
        stream = self.proc.stderr
        try:
            async with asyncio.timeout(START_S):
                while True:
                    line = (await stream.readline()).decode(errors="replace")
                    if not line:
                        raise AssertionError(f"worker {self.index} exited: {self.output()}")
                    self.stderr.append(line)
                    if READY_LINE in line:
                        break
                await wait_listening(self.port, START_S)
        except TimeoutError:
            raise AssertionError(f"worker {self.index} not ready: {self.output()}") from None
        self._drain = asyncio.create_task(self._drain_stderr(stream))

    async def kill(self) -> None:
        """kill -9: no cleanup of any kind happens in the worker."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
        async with asyncio.timeout(10):
            await self.proc.wait()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time; its clients are closed."""
        for client in self._clients:
            await client.close()
        self._clients.clear()
        proc = self.proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(15):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._drain is not None:
            self._drain.cancel()
            await asyncio.gather(self._drain, return_exceptions=True)

    def output(self) -> str:
        return "".join(self.stderr)[-3000:]

    def log_events(self) -> list[dict[str, Any]]:
        """The JSON lines of the worker's agent.log."""
        path = self.home / "logs" / "agent.log"
        if not path.exists():
            return []
        events = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.stderr.append(line.decode(errors="replace"))


@asynccontextmanager
async def running_workers(
    tmp_path: Path, configs: Sequence[dict[str, Any]]
) -> AsyncIterator[list[Worker]]:
    """Start one worker per config (in parallel), wait until all are ready, stop them all."""
    workers = []
    for i, config in enumerate(configs):
        home = tmp_path / f"worker{i}"
        home.mkdir()
        (home / "config.yaml").write_text(json.dumps(config), encoding="utf-8")
        port = config["gateway"]["http"]["port"]
        workers.append(Worker(index=i, home=home, port=port))
    try:
        for w in workers:
            await w.start()
        await asyncio.gather(*(w.wait_ready() for w in workers))
        yield workers
    finally:
        await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)


async def ask(
    client: openai.AsyncOpenAI, text: str, session_id: str | None = None
) -> tuple[str, str]:
    """One non-streaming turn; (reply, session id)."""
    headers = {SESSION_HEADER: session_id} if session_id else {}
    async with asyncio.timeout(REQUEST_S):
        raw = await client.chat.completions.with_raw_response.create(
            model="test-model",
            messages=[{"role": "user", "content": text}],
            extra_headers=headers,
        )
    completion = raw.parse()
    return completion.choices[0].message.content or "", raw.headers[SESSION_HEADER]


def worker_env(home: Path) -> dict[str, str]:
    """This environment without HERMES_* variables, with HERMES_HOME set to `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["HERMES_HOME"] = str(home)
    return env


def hermes_command() -> list[str]:
    """The installed `hermes` command of this interpreter's environment (as a user runs it)."""
    script = Path(sys.executable).parent / "hermes"
    if script.exists():
        return [str(script)]
    return [sys.executable, str(Path(__file__).resolve().parents[2] / "run_agent.py")]


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
