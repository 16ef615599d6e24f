"""Benchmark `hermes chat -q` start-to-reply against a local fake model, beside an import floor.

Prints JSON. Each route runs N times in fresh processes (the CLI as a user runs it); the fake LLM
serves on 127.0.0.1 in this process. Beside every run of ours, in alternation, runs the route's
*import floor*: a Python process that imports only the route's provider SDK (openai or anthropic)
and sends the very request body our run sent, streamed, printing the text (the least a one-shot
client of that SDK can do). Both get the same interpreter, the same bytecode cache and the same
machine load, so the ratio of medians is what our runtime (config, store, runner, tools) costs.

Targets: issue 31: peak RSS <= 96 MiB and median wall <= 1.2x the import floor's on the
openai-compatible route; issue 2: median under 1.0 s, peak RSS under 80 MB, default request
under 8 KB for a one-line prompt. Bytecode is cached in a temporary PYTHONPYCACHEPREFIX warmed by one uncounted run each
(as an installed package has its .pyc), whatever PYTHONDONTWRITEBYTECODE says in the caller's
environment. The machine may be shared: the load average before and after is part of the output,
and the CPU time (user + sys) of each process is reported beside the wall time.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.llm_server import FakeLLM  # noqa: E402

ROUTES = {
    "anthropic": {"provider": "anthropic", "default": "claude-sonnet-4-6"},
    "openai-compatible": {"provider": "custom", "default": "gpt-4o"},
}
TARGET_RSS_MIB = 96
TARGET_WALL_X_FLOOR = 1.2
QUERY = "What is the capital of France?"

# The floor: the provider SDK alone, the same request body, streamed, the text printed.
FLOOR_OPENAI = """
import json, sys
import openai
body = json.loads(sys.argv[2])
client = openai.OpenAI(base_url=sys.argv[1], api_key="bench-key")
known = {"model", "messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens",
         "temperature", "stream", "stream_options", "parallel_tool_calls", "reasoning_effort"}
args = {k: v for k, v in body.items() if k in known}
extra = {k: v for k, v in body.items() if k not in known}
for chunk in client.chat.completions.create(**args, extra_body=extra or None):
    if chunk.choices and chunk.choices[0].delta.content:
        sys.stdout.write(chunk.choices[0].delta.content)
print()
"""
FLOOR_ANTHROPIC = """
import json, sys
import anthropic
body = json.loads(sys.argv[2])
client = anthropic.Anthropic(base_url=sys.argv[1], api_key="bench-key")
known = {"model", "messages", "system", "tools", "tool_choice", "max_tokens", "temperature",
         "stream", "metadata", "thinking"}
args = {k: v for k, v in body.items() if k in known and k != "stream"}
extra = {k: v for k, v in body.items() if k not in known}
with client.messages.stream(**args, extra_body=extra or None) as stream:
    for text in stream.text_stream:
        sys.stdout.write(text)
print()
"""


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


def _timed(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """One fresh process: wall seconds, CPU seconds (user + sys) and peak RSS in MiB."""
    started = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M %U %S", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[1:3]} failed: {proc.stderr[-800:]}")
    peak_kb, user, system = proc.stderr.strip().splitlines()[-1].split()
    return {"wall_s": elapsed, "cpu_s": float(user) + float(system), "rss_mib": int(peak_kb) / 1024}


def _summary(samples: list[dict[str, float]]) -> dict[str, float]:
    walls = sorted(s["wall_s"] for s in samples)
    return {
        "median_wall_s": round(statistics.median(walls), 3),
        "min_wall_s": round(walls[0], 3),
        "max_wall_s": round(walls[-1], 3),
        "median_cpu_s": round(statistics.median(s["cpu_s"] for s in samples), 3),
        "peak_rss_mib": round(max(s["rss_mib"] for s in samples), 1),
        "median_rss_mib": round(statistics.median(s["rss_mib"] for s in samples), 1),
    }


def bench_route(fake: FakeLLM, route: str, runs: int, env: dict[str, str]) -> dict[str, Any]:
    model = ROUTES[route]
    anthropic = model["provider"] == "anthropic"
    base_url = fake.url if anthropic else fake.openai_base_url
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "config.yaml").write_text(
            f"model:\n  provider: {model['provider']}\n  default: {model['default']}\n"
            f"  base_url: {base_url}\n  api_key: bench-key\n  context_length: 128000\n"
        )
        ours_env = {**env, "HERMES_HOME": str(home)}
        ours = [sys.executable, str(ROOT / "run_agent.py"), "chat", "-q", QUERY]
        before = len(fake.requests)
        _timed(ours, ours_env)  # warm-up: writes the bytecode cache and the store's schema
        request = next(r for r in fake.requests[before:] if r.json and "messages" in r.json)
        body = json.dumps(request.json)
        floor = [sys.executable, "-c", FLOOR_ANTHROPIC if anthropic else FLOOR_OPENAI]
        floor += [base_url, body]
        _timed(floor, env)  # warm-up of the floor's bytecode
        ours_runs: list[dict[str, float]] = []
        floor_runs: list[dict[str, float]] = []
        for _ in range(runs):  # alternate, so a change of machine load hits both alike
            ours_runs.append(_timed(ours, ours_env))
            floor_runs.append(_timed(floor, env))
    mine, base = _summary(ours_runs), _summary(floor_runs)
    wall_x = mine["median_wall_s"] / base["median_wall_s"]
    return {
        "route": route,
        "runs": runs,
        "ours": mine,
        "import_floor": base,
        "wall_x_floor": round(wall_x, 2),
        "cpu_x_floor": round(mine["median_cpu_s"] / base["median_cpu_s"], 2),
        "rss_over_floor_mib": round(mine["peak_rss_mib"] - base["peak_rss_mib"], 1),
        "default_request_bytes": int(request.headers.get("content-length", "0")),
        "meets_issue_31": mine["peak_rss_mib"] <= TARGET_RSS_MIB and wall_x <= TARGET_WALL_X_FLOOR,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7, help="measured runs per route (>= 5)")
    parser.add_argument("--route", choices=[*ROUTES, "all"], default="all")
    args = parser.parse_args()
    if args.runs < 5:
        parser.error("--runs must be at least 5: the figures are medians of repeats")
    fake, _ = _serve_fake()
    routes = list(ROUTES) if args.route == "all" else [args.route]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as pycache:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
        results = [bench_route(fake, r, args.runs, env) for r in routes]
    load_after = os.getloadavg()
    print(
        json.dumps(
            {
                "benchmark": "startup",
                "targets": {
                    "issue_31": {
                        "peak_rss_mib": TARGET_RSS_MIB,
                        "median_wall_x_import_floor": TARGET_WALL_X_FLOOR,
                        "route": "openai-compatible",
                    },
                    "issue_2": {
                        "median_wall_s": 1.0,
                        "peak_rss_mb": 80,
                        "default_request_bytes": 8192,
                    },
                },
                "assumptions": {
                    "command": f"python run_agent.py chat -q {QUERY!r}, a fresh HERMES_HOME "
                    "per route (one store, created by the warm-up run)",
                    "import_floor": "python -c: import only the route's SDK (openai or "
                    "anthropic), send the same request body our run sent (streamed, sync "
                    "client), print the text; no config, no store",
                    "model": "sim.llm_server.FakeLLM on 127.0.0.1 in this process (echo reply)",
                    "bytecode": "cached under a temporary PYTHONPYCACHEPREFIX, warmed by one "
                    "uncounted run of each command",
                    "measure": "wall: perf_counter around the process; cpu: user + sys and peak "
                    "RSS from /usr/bin/time; ours and the floor alternate run by run",
                    "python": sys.version.split()[0],
                    "cpus": os.cpu_count(),
                    "load_average_1_5_15_before": [round(x, 2) for x in load_before],
                    "load_average_1_5_15_after": [round(x, 2) for x in load_after],
                },
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
