"""Benchmark the gateway through its HTTP API with a zero-latency fake LLM; prints JSON.

    /work/venv/bin/python scripts/bench_gateway.py [--sessions 100] [--per-session 10]

Measures, on a real Runtime (SQLite file in a temp dir) behind `HttpApiServer`:
- throughput: `sessions` concurrent clients, each sending `per-session` requests on its own
  session (X-Hermes-Session-Id), requests per second over the whole run;
- the runtime's own added latency: end-to-end latency of one request at a time minus the time
  spent inside the provider call (SDK + fake LLM), p50/p99; the same under full load is reported
  too (it includes queueing behind the other 99 clients);
- memory per idle session: tracemalloc growth over `idle` new sessions after one turn each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
import structlog  # noqa: E402

from agent.providers.base import ProviderReply, ProviderRequest  # noqa: E402
from gateway.platforms.http_api import SESSION_HEADER, HttpApiServer  # noqa: E402
from gateway.run import GatewayRunner  # noqa: E402
from sim.llm_server import FakeLLM  # noqa: E402
from tests.gateway.harness import make_config  # noqa: E402

KEY = "sk-bench"
TARGETS = {"requests_per_s": 200.0, "added_latency_p50_ms": 20.0, "bytes_per_idle_session": 50_000}


class TimedProvider:
    """Wraps the runtime's provider and records how long each call took, by request tag."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name = getattr(inner, "name", "timed")
        self.seconds: dict[str, float] = {}

    async def complete(self, request: ProviderRequest, **kw: Any) -> ProviderReply:
        started = time.perf_counter()
        try:
            return await self._inner.complete(request, **kw)
        finally:
            self.seconds[_tag(request)] = time.perf_counter() - started

    async def aclose(self) -> None:
        await self._inner.aclose()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    from cli.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        async with _fake_llm_process() as llm:
            config = make_config(llm, home / "state.db", model={"context_length": 200_000})
            runtime = await Runtime.start(config, home, {})
            timed = TimedProvider(runtime.deps.provider)
            runtime.deps = replace(runtime.deps, provider=timed)  # type: ignore[arg-type]
            runner = GatewayRunner(runtime)
            server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
            await server.start()
            try:
                return await _measure(args, f"http://127.0.0.1:{server.port}", runner, timed)
            finally:
                await server.stop()
                await runner.stop()
                await runtime.aclose()


class _RemoteLLM:
    """FakeLLM's address when it runs in a child process (its CPU is not the runtime's)."""

    def __init__(self, port: int) -> None:
        self.anthropic_base_url = f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def _fake_llm_process() -> AsyncIterator[_RemoteLLM]:
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve-fake-llm", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        async with asyncio.timeout(30):
            port = int((await child.stdout.readline()).decode())
        yield _RemoteLLM(port)
    finally:
        child.terminate()
        await child.wait()


async def _serve_fake_llm() -> None:
    async with FakeLLM() as llm:
        print(llm.port, flush=True)
        await asyncio.Event().wait()


async def _measure(
    args: argparse.Namespace, url: str, runner: GatewayRunner, timed: TimedProvider
) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=args.sessions + 10)
    async with aiohttp.ClientSession(url, connector=connector) as http:
        sessions = await asyncio.gather(*(_request(http, None)[1] for _ in range(args.sessions)))
        # warm up every code path once more before timing
        await asyncio.gather(*(_request(http, s)[1] for s in sessions))
        sequential = [
            await _timed_request(http, sessions[0], timed) for _ in range(args.sequential)
        ]
        started = time.perf_counter()
        loaded = await asyncio.gather(
            *(_client(http, s, args.per_session, timed) for s in sessions)
        )
        elapsed = time.perf_counter() - started
        memory = await _idle_session_bytes(http, args.idle)
    under_load = [x for batch in loaded for x in batch]
    result = {
        "sessions": args.sessions,
        "requests": len(under_load),
        "requests_per_s": round(len(under_load) / elapsed, 1),
        "added_latency_ms": _percentiles([added for added, _ in sequential]),
        "end_to_end_latency_ms": _percentiles([total for _, total in sequential]),
        "under_load_added_latency_ms": _percentiles([added for added, _ in under_load]),
        "under_load_end_to_end_ms": _percentiles([total for _, total in under_load]),
        "bytes_per_idle_session": memory,
        "cached_agents": runner.cached_agents,
        "targets": TARGETS,
    }
    result["targets_met"] = {
        "requests_per_s": result["requests_per_s"] >= TARGETS["requests_per_s"],
        "added_latency_p50_ms": result["added_latency_ms"]["p50"]
        <= TARGETS["added_latency_p50_ms"],
        "bytes_per_idle_session": memory <= TARGETS["bytes_per_idle_session"],
    }
    return result


async def _client(
    http: aiohttp.ClientSession, session_id: str, count: int, timed: TimedProvider
) -> list[tuple[float, float]]:
    return [await _timed_request(http, session_id, timed) for _ in range(count)]


async def _timed_request(
    http: aiohttp.ClientSession, session_id: str, timed: TimedProvider
) -> tuple[float, float]:
    """(added ms, end-to-end ms) of one request."""
    tag, pending = _request(http, session_id)
    started = time.perf_counter()
    await pending
    total = time.perf_counter() - started
    return (total - timed.seconds.pop(tag, 0.0)) * 1000, total * 1000


def _request(http: aiohttp.ClientSession, session_id: str | None) -> tuple[str, Any]:
    tag = uuid.uuid4().hex

    async def send() -> str:
        headers = {"Authorization": f"Bearer {KEY}"}
        if session_id:
            headers[SESSION_HEADER] = session_id
        body = {"model": "bench", "messages": [{"role": "user", "content": f"hi {tag}"}]}
        async with asyncio.timeout(60):
            async with http.post("/v1/chat/completions", json=body, headers=headers) as response:
                response.raise_for_status()
                await response.read()
                return response.headers[SESSION_HEADER]

    return tag, send()


async def _idle_session_bytes(http: aiohttp.ClientSession, count: int) -> int:
    """Python heap growth per new session that had one turn and then went idle."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for start in range(0, count, 50):
        batch = range(start, min(start + 50, count))
        await asyncio.gather(*(_request(http, None)[1] for _ in batch))
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return round((after - before) / count)


def _percentiles(values_ms: list[float]) -> dict[str, float]:
    ordered = sorted(values_ms)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50": round(q[49], 2), "p99": round(q[98], 2), "max": round(ordered[-1], 2)}


def _tag(request: ProviderRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        return text.rsplit(" ", 1)[-1].strip('"}]')
    return ""


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--idle", type=int, default=300)
    parser.add_argument("--serve-fake-llm", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_fake_llm:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve_fake_llm())
    else:
        print(json.dumps(asyncio.run(main(options)), indent=2))
