"""Benchmark the gateway through its HTTP API with a zero-latency fake LLM; prints JSON.

    /work/venv/bin/python scripts/bench_gateway.py [--sessions 100] [--per-session 10]
    /work/venv/bin/python scripts/bench_gateway.py --stateless [--history 50]
    /work/venv/bin/python scripts/bench_gateway.py --workers 2 --db postgresql [--pg-url URL]
    /work/venv/bin/python scripts/bench_gateway.py --cpu-per-turn [--marks 50 1000] [--rounds 1]

Measures, on a real Runtime (SQLite file in a temp dir) behind `HttpApiServer`:
- throughput: `sessions` concurrent clients, each sending `per-session` requests on its own
  session (X-Hermes-Session-Id), requests per second over the whole run;
- the runtime's own added latency: end-to-end latency of one request at a time minus the time
  spent inside the provider call (SDK + fake LLM), p50/p99; the same under full load is reported
  too (it includes queueing behind the other 99 clients);
- memory per idle session: tracemalloc growth over `idle` new sessions after one turn each.

With `--stateless` the clients are stateless instead (as Open WebUI is): no session header, each
request resends its whole conversation, which starts with a `history`-message history (50) and
grows by the reply and the next question; each conversation's first request (which imports the
history) is warm-up. The same figures are reported, whether every conversation stayed on one
stored session (prefix recognition), and the same conversations continued by session header
instead (the fair comparison: equal contexts), each with this process's CPU per request (the
runtime and the load generator; the fake model runs in its own process), which a busy machine
disturbs less than wall-clock throughput.

With `--workers N` it measures real `hermes gateway run` processes on one store instead (a fresh
SQLite file, or a fresh PostgreSQL database on `--pg-url`): one worker, then N workers, with the
same load; every session's requests go round-robin over the workers (the worst case: each turn
finds the session moved and reloads it) and, for N workers, also sticky (one worker per
session, as a proxy with session affinity routes). Reported: requests per second and the
end-to-end latency p50/p99, under load and one request at a time.

With `--cpu-per-turn` it measures server CPU per turn instead: `hermes gateway run` beside a
floor gateway (`floor_gateway.py`: aiohttp + `AsyncOpenAI`, no store), each in its own process
against one zero-delay fake model process, over one session grown turn by turn, at each of
`--marks` (`gateway_cpu.py` says how).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
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
from gateway.http import SESSION_HEADER, HttpApiServer  # noqa: E402
from gateway.run import GatewayRunner  # noqa: E402
from sim.llm_server import FakeLLM  # noqa: E402
from tests.gateway.harness import make_config  # noqa: E402
from tests.integration.workers import KEY as WORKERS_KEY  # noqa: E402

KEY = "sk-bench"
PG_DEFAULT = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
TARGETS = {"requests_per_s": 200.0, "added_latency_p50_ms": 20.0, "bytes_per_idle_session": 50_000}
STATELESS_TARGETS = {"requests_per_s": 200.0, "added_latency_p50_ms": 10.0}


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
                if args.stateless:
                    return await _measure_stateless(args, f"http://127.0.0.1:{server.port}", timed)
                return await _measure(args, f"http://127.0.0.1:{server.port}", runner, timed)
            finally:
                await server.stop()
                await runner.stop()
                await runtime.aclose()


class _RemoteLLM:
    """FakeLLM's address when it runs in a child process (its CPU is not the runtime's)."""

    def __init__(self, port: int) -> None:
        self.anthropic_base_url = f"http://127.0.0.1:{port}"
        self.openai_base_url = f"http://127.0.0.1:{port}/v1"


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
    async with FakeLLM(record_bodies=False) as llm:
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


def _request(
    http: aiohttp.ClientSession, session_id: str | None, *, base: str = ""
) -> tuple[str, Any]:
    tag = uuid.uuid4().hex
    key = WORKERS_KEY if base else KEY

    async def send() -> str:
        headers = {"Authorization": f"Bearer {key}"}
        if session_id:
            headers[SESSION_HEADER] = session_id
        body = {"messages": [{"role": "user", "content": f"hi {tag}"}]}  # the default model
        url = f"{base}/v1/chat/completions"
        async with asyncio.timeout(60):
            async with http.post(url, json=body, headers=headers) as response:
                response.raise_for_status()
                await response.read()
                return response.headers[SESSION_HEADER]

    return tag, send()


async def _measure_stateless(
    args: argparse.Namespace, url: str, timed: TimedProvider
) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=args.sessions + 10)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a benchmark."}]
    while len(history) < args.history - 1:  # the request adds the new question
        n = len(history)
        history.append({"role": "user" if n % 2 else "assistant", "content": f"turn {n} " * 20})
    if history[-1]["role"] != "assistant":
        history.pop()
    conversations = [_Stateless(list(history)) for _ in range(args.sessions)]
    async with aiohttp.ClientSession(url, connector=connector) as http:
        await asyncio.gather(*(c.turn(http, timed) for c in conversations))  # imports: warm-up
        sequential = [
            await conversations[k % len(conversations)].turn(http, timed)
            for k in range(args.sequential)
        ]
        started, cpu = time.perf_counter(), time.process_time()
        loaded = await asyncio.gather(
            *(_stateless_client(http, c, args.per_session, timed) for c in conversations)
        )
        elapsed, stateless_cpu = time.perf_counter() - started, time.process_time() - cpu
        for conversation in conversations:  # the same conversations, continued by header
            conversation.by_header = True
        started, cpu = time.perf_counter(), time.process_time()
        by_header = await asyncio.gather(
            *(_stateless_client(http, c, args.per_session, timed) for c in conversations)
        )
        header_elapsed, header_cpu = time.perf_counter() - started, time.process_time() - cpu
    under_load = [x for batch in loaded for x in batch]
    header_load = [x for batch in by_header for x in batch]
    result: dict[str, Any] = {
        "mode": "stateless",
        "conversations": args.sessions,
        "history_messages_at_start": len(history),
        "messages_per_request": {"first": len(history) + 1, "last": conversations[0].sent_max},
        "requests": len(under_load),
        "requests_per_s": round(len(under_load) / elapsed, 1),
        "cpu_ms_per_request": round(stateless_cpu / len(under_load) * 1000, 2),
        "added_latency_ms": _percentiles([added for added, _ in sequential]),
        "end_to_end_latency_ms": _percentiles([total for _, total in sequential]),
        "under_load_added_latency_ms": _percentiles([added for added, _ in under_load]),
        "under_load_end_to_end_ms": _percentiles([total for _, total in under_load]),
        "one_session_per_conversation": all(len(c.sessions) == 1 for c in conversations),
        "same_conversations_by_session_header": {
            "requests_per_s": round(len(header_load) / header_elapsed, 1),
            "cpu_ms_per_request": round(header_cpu / len(header_load) * 1000, 2),
            "under_load_added_latency_ms": _percentiles([added for added, _ in header_load]),
        },
        "targets": STATELESS_TARGETS,
    }
    result["targets_met"] = {
        "requests_per_s": result["requests_per_s"] >= STATELESS_TARGETS["requests_per_s"],
        "added_latency_p50_ms": result["added_latency_ms"]["p50"]
        <= STATELESS_TARGETS["added_latency_p50_ms"],
    }
    return result


class _Stateless:
    """One stateless client's conversation: it resends everything, then keeps the reply."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.sessions: set[str] = set()
        self.sent_max = 0
        self.by_header = False
        """Session mode instead: only the new question, with `X-Hermes-Session-Id`."""

    async def turn(self, http: aiohttp.ClientSession, timed: TimedProvider) -> tuple[float, float]:
        """(added ms, end-to-end ms) of one request."""
        tag = uuid.uuid4().hex
        self.messages.append({"role": "user", "content": f"next {tag}"})
        self.sent_max = max(self.sent_max, len(self.messages))
        body: dict[str, Any] = {"messages": self.messages}  # the default model
        headers = {"Authorization": f"Bearer {KEY}"}
        if self.by_header:
            body["messages"] = self.messages[-1:]
            headers[SESSION_HEADER] = next(iter(self.sessions))
        started = time.perf_counter()
        async with asyncio.timeout(60):
            async with http.post("/v1/chat/completions", json=body, headers=headers) as response:
                response.raise_for_status()
                reply = await response.json()
        total = time.perf_counter() - started
        self.sessions.add(response.headers[SESSION_HEADER])
        content = reply["choices"][0]["message"]["content"]
        self.messages.append({"role": "assistant", "content": content})
        return (total - timed.seconds.pop(tag, 0.0)) * 1000, total * 1000


async def _stateless_client(
    http: aiohttp.ClientSession, conversation: _Stateless, count: int, timed: TimedProvider
) -> list[tuple[float, float]]:
    return [await conversation.turn(http, timed) for _ in range(count)]


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


async def workers_main(args: argparse.Namespace) -> dict[str, Any]:
    """One worker and `args.workers` workers as real processes on one store, same load; the
    configurations take turns for `args.rounds` rounds and medians are reported (a shared
    2-core machine is noisy)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    plans = {
        "one_worker": (1, False),
        f"{args.workers}_workers_round_robin": (args.workers, False),
        f"{args.workers}_workers_sticky": (args.workers, True),
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plans}
    async with _fake_llm_process() as llm:
        for _ in range(args.rounds):
            for name, (count, sticky) in plans.items():
                runs[name].append(await _cluster_run(args, llm, count, sticky=sticky))
    result: dict[str, Any] = {
        "db": args.db,
        "wire": args.wire,
        "workers": args.workers,
        "sessions": args.sessions,
        "per_session": args.per_session,
        "rounds": args.rounds,
    }
    for name, measured in runs.items():
        result[name] = _medians(measured)
    return result


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(path: tuple[str, ...]) -> float:
        values = []
        for run in runs:
            value: Any = run
            for key in path:
                value = value[key]
            values.append(float(value))
        return round(statistics.median(values), 2)

    return {
        "requests_per_s": median(("requests_per_s",)),
        "requests_per_s_runs": [run["requests_per_s"] for run in runs],
        "under_load_latency_ms": {q: median(("under_load_latency_ms", q)) for q in ("p50", "p99")},
        "sequential_latency_ms": {q: median(("sequential_latency_ms", q)) for q in ("p50", "p99")},
    }


async def _cluster_run(
    args: argparse.Namespace, llm: _RemoteLLM, count: int, *, sticky: bool
) -> dict[str, Any]:
    from tests.gateway.harness import free_port
    from tests.integration.workers import running_workers, worker_config
    from tests.state.fixtures import fresh_pg_database

    with tempfile.TemporaryDirectory() as tmp:
        async with contextlib.AsyncExitStack() as stack:
            url = f"sqlite+aiosqlite:///{tmp}/state.db"
            if args.db == "postgresql":
                url = await stack.enter_async_context(fresh_pg_database(args.pg_url))
            configs = [
                worker_config(
                    llm_url=llm.openai_base_url,
                    db_url=url,
                    port=free_port(),
                    lease_ttl_s=10.0,
                    model={"context_length": 200_000, **_provider(args, llm)},
                    compression={"micro_compact": False},
                    logging={"level": "warning"},
                )
                for _ in range(count)
            ]
            workers = await stack.enter_async_context(running_workers(Path(tmp), configs))
            urls = [f"http://127.0.0.1:{w.port}" for w in workers]
            return await _cluster_load(args, urls, sticky=sticky)


def _provider(args: argparse.Namespace, llm: _RemoteLLM) -> dict[str, str]:
    """The workers' model route: the Anthropic wire, as the in-process benchmark uses."""
    if args.wire == "openai":
        return {"provider": "custom", "base_url": llm.openai_base_url}
    return {"provider": "anthropic", "base_url": llm.anthropic_base_url}


async def _cluster_load(
    args: argparse.Namespace, urls: list[str], *, sticky: bool
) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=args.sessions + 10)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def send(url: str, session_id: str | None) -> tuple[str, float]:
            started = time.perf_counter()
            _, pending = _request(http, session_id, base=url)
            got = await pending
            return got, (time.perf_counter() - started) * 1000

        sessions = [(await send(urls[i % len(urls)], None))[0] for i in range(args.sessions)]

        def url_for(i: int, k: int) -> str:
            return urls[(i if sticky else i + k) % len(urls)]

        sequential = [(await send(url_for(0, k), sessions[0]))[1] for k in range(args.sequential)]

        async def client(i: int) -> list[float]:
            return [(await send(url_for(i, k), sessions[i]))[1] for k in range(args.per_session)]

        started = time.perf_counter()
        loaded = await asyncio.gather(*(client(i) for i in range(args.sessions)))
        elapsed = time.perf_counter() - started
    under_load = [x for batch in loaded for x in batch]
    return {
        "workers": len(urls),
        "routing": "sticky" if sticky else "round_robin",
        "requests": len(under_load),
        "requests_per_s": round(len(under_load) / elapsed, 1),
        "under_load_latency_ms": _percentiles(under_load),
        "sequential_latency_ms": _percentiles(sequential),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--idle", type=int, default=300)
    parser.add_argument("--stateless", action="store_true", help="clients resend everything")
    parser.add_argument("--history", type=int, default=50, help="--stateless: history length")
    parser.add_argument("--workers", type=int, default=0, help="real worker processes (>= 1)")
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--wire", choices=["anthropic", "openai"], default="anthropic")
    parser.add_argument("--rounds", type=int, help="runs per setup (--workers: 3, else 1)")
    parser.add_argument("--cpu-per-turn", action="store_true", help="ours vs a floor gateway")
    parser.add_argument("--marks", type=int, nargs="+", default=[50, 1000], help="turns sampled")
    parser.add_argument("--window", type=int, default=20, help="turns sampled before each mark")
    parser.add_argument("--context-window", type=int, default=200_000, help="ours, in tokens")
    parser.add_argument(
        "--kinds", nargs="+", default=["ours", "floor", "floor_post"], help="gateways measured"
    )
    parser.add_argument("--pg-url", default=os.environ.get("HERMES_TEST_PG_URL") or PG_DEFAULT)
    parser.add_argument("--serve-fake-llm", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_fake_llm:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve_fake_llm())
    elif options.cpu_per_turn:
        from scripts import gateway_cpu

        options.rounds = options.rounds or 1
        print(json.dumps(asyncio.run(gateway_cpu.main(options)), indent=2))
    elif options.workers:
        options.rounds = options.rounds or 3
        print(json.dumps(asyncio.run(workers_main(options)), indent=2))
    else:
        print(json.dumps(asyncio.run(main(options)), indent=2))
