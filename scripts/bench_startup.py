"""Benchmark `hermes chat -q` start-to-reply against a local fake model: wall time, memory, request size.

Prints JSON. Each route runs N times in fresh processes (the CLI as a user runs it); the fake LLM
serves on 127.0.0.1 in this process. Targets from issue 2: median under 1.0 s, peak RSS under 80 MB,
default request under 8 KB for a one-line prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.llm_server import FakeLLM  # noqa: E402

ROUTES = {
    "anthropic": {"provider": "anthropic", "default": "claude-sonnet-4-6"},
    "openai-compatible": {"provider": "custom", "default": "gpt-4o"},
}


def _serve_fake() -> tuple[FakeLLM, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, FakeLLM] = {}

    async def main() -> None:
        async with FakeLLM() as fake:
            holder["fake"] = fake
            ready.set()
            await asyncio.Event().wait()

    threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True).start()
    if not ready.wait(10):
        raise RuntimeError("the fake LLM did not start")
    return holder["fake"], loop


def _run_once(home: Path, env: dict[str, str]) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run(
        [
            "/usr/bin/time",
            "-f",
            "%M",
            sys.executable,
            str(ROOT / "run_agent.py"),
            "chat",
            "-q",
            "What is the capital of France?",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"hermes chat failed: {proc.stderr[-500:]}")
    peak_kb = int(proc.stderr.strip().splitlines()[-1])
    return elapsed, peak_kb


def bench_route(fake: FakeLLM, route: str, runs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        model = ROUTES[route]
        base_url = fake.url if model["provider"] == "anthropic" else fake.openai_base_url
        (home / "config.yaml").write_text(
            f"model:\n  provider: {model['provider']}\n  default: {model['default']}\n"
            f"  base_url: {base_url}\n  api_key: bench-key\n  context_length: 128000\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env["HERMES_HOME"] = str(home)
        before = len(fake.requests)
        samples = [_run_once(home, env) for _ in range(runs)]
        request = fake.requests[before]
    times = sorted(s[0] for s in samples)
    return {
        "route": route,
        "runs": runs,
        "median_wall_s": round(statistics.median(times), 3),
        "min_wall_s": round(times[0], 3),
        "max_wall_s": round(times[-1], 3),
        "peak_rss_mb": round(max(s[1] for s in samples) / 1024, 1),
        "default_request_bytes": int(request.headers.get("content-length", "0")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--route", choices=[*ROUTES, "all"], default="all")
    args = parser.parse_args()
    fake, _ = _serve_fake()
    routes = list(ROUTES) if args.route == "all" else [args.route]
    results = [bench_route(fake, r, args.runs) for r in routes]
    print(
        json.dumps(
            {
                "benchmark": "startup",
                "targets": {"median_wall_s": 1.0, "peak_rss_mb": 80, "default_request_bytes": 8192},
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
