"""Server CPU per turn of our gateway beside a floor gateway, over one growing session.

Run through `bench_gateway.py --cpu-per-turn` (options there). Process layout, the same for both
gateways: this process is the client (one session, one turn at a time, session mode); the gateway
is a process of its own (ours: `hermes gateway run`, i.e. `run_agent.main`, on a config.yaml in a
fresh HERMES_HOME; the floor: `floor_gateway.py`); both call one zero-delay FakeLLM, a third
process, over the OpenAI Chat Completions wire, non-streamed.

A gateway's CPU is its process CPU time (`time.process_time_ns`: every thread, ended ones
included), read inside the gateway process by a thread that sleeps on stdin and wakes only to
answer. A turn's CPU is the difference between the readings before it and before the next turn,
so work a turn leaves running after its reply (micro-compaction, store writes) is counted, and the
provider call's own CPU (the SDK, JSON) is the gateway's. Turns `mark - window + 1 .. mark` are
sampled for each mark; the figure is the median of the samples of every round.

`BENCH_PROFILE=<file>` in the environment profiles our gateway's event loop thread (cProfile)
into `<file>`: where a turn's CPU goes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

KEY = "sk-bench-cpu"
MODEL = "bench-model"
SESSION_HEADER = "X-Hermes-Session-Id"
KINDS = ("ours", "floor", "floor_post")
"""`floor_post` is the floor posting its body as our providers do (no SDK walk): for context."""
REPLY_S = 120.0
"""One turn's deadline: a turn of the old code at 2,000 messages took ~0.5 s on a loaded box."""


async def main(args: argparse.Namespace) -> dict[str, Any]:
    marks = sorted(args.marks)
    load_before = os.getloadavg()
    started = time.perf_counter()
    kinds = [kind for kind in KINDS if kind in args.kinds]
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    async with _child_process("--serve-fake-llm") as fake:
        llm_url = f"http://127.0.0.1:{int(await fake.ask('port'))}/v1"
        for _ in range(args.rounds):
            for kind in kinds:
                runs[kind].append(await _one_run(kind, llm_url, fake, marks, args))
    result: dict[str, Any] = {"mode": "cpu_per_turn"}
    for kind, measured in runs.items():
        result[kind] = _summary(measured, marks)
    for kind in kinds:  # what each gateway adds per message in the session (two per turn)
        first, last = result[kind][f"turn_{marks[0]}"], result[kind][f"turn_{marks[-1]}"]
        growth = (last["cpu_ms"] - first["cpu_ms"]) / (2 * (marks[-1] - marks[0]))
        result[kind]["growth_us_per_message"] = round(growth * 1000, 2)
    for floor in ("floor", "floor_post"):
        if "ours" in runs and floor in runs:
            result[f"ours_over_{floor}"] = {
                f"turn_{m}": round(
                    result["ours"][f"turn_{m}"]["cpu_ms"] / result[floor][f"turn_{m}"]["cpu_ms"], 2
                )
                for m in marks
            }
    result["target"] = "ours <= 1.0x the floor at every mark"
    if "ours_over_floor" in result:
        result["target_met"] = all(r <= 1.0 for r in result["ours_over_floor"].values())
    result["assumptions"] = {
        "session": f"one session, {marks[-1] + 1} turns, one at a time; the client sends only "
        "the new user message (session header), as the floor's API also takes it",
        "user_message_chars": len(_text(1)),
        "model": "FakeLLM in its own process, zero delay, replies 'echo: <last user text>', "
        "OpenAI Chat Completions, not streamed",
        "ours": f"hermes gateway run, defaults except: provider openai at the fake, "
        f"context_length {args.context_window}, tools off (the floor has none), "
        "SQLite store in a fresh HERMES_HOME",
        "floor": "scripts/floor_gateway.py: aiohttp + AsyncOpenAI(DefaultAioHttpClient)"
        ".chat.completions.create, history in a dict, no store",
        "floor_post": "the same floor sending its body through client.post, as our providers "
        "do (no per-request SDK walk of the messages); for context, not the target",
        "window": f"turns mark-{args.window - 1}..mark sampled; medians over "
        f"{args.rounds} round(s), the gateways alternating",
        "cpu": "gateway process CPU time (all threads) between the starts of consecutive turns",
        "load_average_1_5_15": {"before": load_before, "after": os.getloadavg()},
        "cpus": os.cpu_count(),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    return result


class _Child:
    """A child process that answers one line on stdout for each line sent on its stdin."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def ask(self, what: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{what}\n".encode())
        await self.proc.stdin.drain()
        async with asyncio.timeout(30):
            while True:
                line = (await self.proc.stdout.readline()).decode()
                if not line:
                    raise RuntimeError(f"the child exited before answering {what!r}")
                if line.startswith(f"{what}="):
                    return line.split("=", 1)[1].strip()


@contextlib.asynccontextmanager
async def _child_process(*argv: str, env: dict[str, str] | None = None) -> AsyncIterator[_Child]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    try:
        yield _Child(proc)
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(15):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _one_run(
    kind: str, llm_url: str, fake: _Child, marks: list[int], args: argparse.Namespace
) -> dict[str, Any]:
    from tests.gateway.harness import free_port, wait_listening

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
        env["HERMES_HOME"] = str(home)
        (home / "config.yaml").write_text(json.dumps(_our_config(llm_url, port, args)))
        argv = ["--serve", kind, "--llm-url", llm_url, "--port", str(port)]
        async with _child_process(*argv, env=env) as gateway:
            await wait_listening(port, timeout_s=60)
            samples, calls = await _turns(gateway, fake, port, marks, args.window)
        active = _active_messages(home / "state.db") if kind == "ours" else None
    return {"samples": samples, "model_calls": calls, "active_messages_at_end": active}


def _our_config(llm_url: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "model": {
            "provider": "openai",
            "default": MODEL,
            "base_url": llm_url,
            "api_key": "sk-fake",
            "context_length": args.context_window,
            "max_retries": 0,
            "timeout_s": REPLY_S,
        },
        "tools": {"enabled": []},
        "gateway": {"http": {"enabled": True, "host": "127.0.0.1", "port": port, "api_key": KEY}},
    }


async def _turns(
    gateway: _Child, fake: _Child, port: int, marks: list[int], window: int
) -> tuple[dict[int, list[float]], dict[int, float]]:
    """Run turns 1 .. last mark + 1; CPU ms of each sampled turn and model calls per turn."""
    sampled = {t for m in marks for t in range(max(1, m - window + 1), m + 1)}
    samples: dict[int, list[float]] = {m: [] for m in marks}
    calls: dict[int, float] = {}
    session: str | None = None
    before: tuple[int, int] | None = None
    async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
        for turn in range(1, marks[-1] + 2):
            now = None
            if turn in sampled or turn - 1 in sampled:
                now = (int(await gateway.ask("cpu_ns")), int(await fake.ask("calls")))
            if before is not None and now is not None and turn - 1 in sampled:
                mark = min(m for m in marks if m >= turn - 1)
                samples[mark].append((now[0] - before[0]) / 1e6)
                calls[mark] = calls.get(mark, 0.0) + (now[1] - before[1])
            before = now
            session = await _turn(http, session, _text(turn))
    return samples, {m: round(calls.get(m, 0.0) / len(samples[m]), 2) for m in marks}


def _text(turn: int) -> str:
    return f"turn {turn}: tell me one more thing about the harbour, the boats and the weather"


async def _turn(http: aiohttp.ClientSession, session: str | None, text: str) -> str:
    headers = {"Authorization": f"Bearer {KEY}"}
    if session:
        headers[SESSION_HEADER] = session
    body = {"messages": [{"role": "user", "content": text}]}
    async with asyncio.timeout(REPLY_S):
        async with http.post("/v1/chat/completions", json=body, headers=headers) as response:
            response.raise_for_status()
            reply = await response.json()
    assert reply["choices"][0]["message"]["content"] == f"echo: {text}", reply
    return response.headers[SESSION_HEADER]


def _active_messages(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (count,) = conn.execute("SELECT count(*) FROM messages WHERE active").fetchone()
    return int(count)


def _summary(runs: list[dict[str, Any]], marks: list[int]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for mark in marks:
        pooled = [s for run in runs for s in run["samples"][mark]]
        summary[f"turn_{mark}"] = {
            "cpu_ms": round(statistics.median(pooled), 2),
            "cpu_ms_p90": round(statistics.quantiles(pooled, n=10)[-1], 2),
            "round_medians": [round(statistics.median(r["samples"][mark]), 2) for r in runs],
            "samples": len(pooled),
            "model_calls_per_turn": [run["model_calls"][mark] for run in runs],
        }
    active = [run["active_messages_at_end"] for run in runs]
    if active[0] is not None:
        summary["active_messages_at_end"] = active
    return summary


# --- the child processes ----------------------------------------------------------------------


def _answer_on_stdin(answers: dict[str, Any]) -> None:
    """A thread that sleeps on stdin and answers each `name` line with `name=<value>`."""

    def run() -> None:
        for line in sys.stdin:
            name = line.strip()
            if name in answers:
                print(f"{name}={answers[name]()}", flush=True)

    threading.Thread(target=run, daemon=True, name="bench-answers").start()


async def _serve_fake_llm() -> None:
    from sim.llm_server import FakeLLM

    async with FakeLLM(record_bodies=False) as llm:
        _answer_on_stdin({"port": lambda: llm.port, "calls": lambda: len(llm.requests)})
        await asyncio.Event().wait()


def _serve_gateway(kind: str, llm_url: str, port: int) -> int:
    _answer_on_stdin({"cpu_ns": time.process_time_ns})
    if kind == "ours":
        import run_agent

        if os.environ.get("BENCH_PROFILE"):
            import cProfile

            with cProfile.Profile() as prof:
                code = run_agent.main(["gateway", "run"])
            prof.dump_stats(os.environ["BENCH_PROFILE"])
            return code
        return run_agent.main(["gateway", "run"])
    from scripts.floor_gateway import serve

    transform = kind == "floor"
    asyncio.run(serve(llm_url=llm_url, port=port, key=KEY, model=MODEL, transform=transform))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve-fake-llm", action="store_true")
    parser.add_argument("--serve", choices=KINDS)
    parser.add_argument("--llm-url", default="")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    if options.serve_fake_llm:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve_fake_llm())
    else:
        sys.exit(_serve_gateway(options.serve, options.llm_url, options.port))
