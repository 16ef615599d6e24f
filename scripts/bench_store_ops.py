"""Micro-benchmark of the store's per-operation overhead on a small session; prints JSON.

    python scripts/bench_store_ops.py [--reps 300] [--engines sqlite,postgresql] [--pg-url URL]

Milliseconds per call (mean and p50) of `append` (one message), `get_session`, `load_active`
(a 20-message transcript), `update_meta` and `archive_and_compact` (keep the first message,
add a summary and carry the last two), one call at a time through the public API.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import text  # noqa: E402

from agent.messages import assistant_message, system_message, user_message  # noqa: E402
from agent.providers.base import Usage  # noqa: E402
from state import SqlSessionStore  # noqa: E402

PG_DEFAULT = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


async def _timed(fn: Callable[[int], Awaitable[Any]], reps: int) -> dict[str, float]:
    for i in range(min(20, reps)):  # warm the statement caches and the connection pool
        await fn(i)
    samples = []
    for i in range(reps):
        t0 = time.perf_counter()
        await fn(i)
        samples.append((time.perf_counter() - t0) * 1000)
    return {
        "mean": round(statistics.fmean(samples), 3),
        "p50": round(statistics.median(samples), 3),
    }


async def bench_ops(store: SqlSessionStore, reps: int) -> dict[str, Any]:
    info = await store.sessions.create_session(platform="bench")
    sid = info.id

    async def append(i: int) -> None:
        usage = Usage(input_tokens=10, output_tokens=5)
        await store.transcript.append(sid, [user_message(f"hello {i} " * 20)], usage=usage)

    small = await store.sessions.create_session(platform="bench")
    transcript = [system_message("s")]
    for i in range(10):
        transcript += [user_message(f"ask {i}"), assistant_message(f"reply {i} " * 10)]
    await store.transcript.append(small.id, transcript[:20])

    async def compact(i: int) -> None:
        active = await store.transcript.load_active(small.id)
        summary = {"role": "user", "content": f"[summary {i}]", "_kind": "summary"}
        await store.transcript.archive_and_compact(small.id, [active[0], summary, *active[-2:]])

    results = {
        "append_ms": await _timed(append, reps),
        "get_session_ms": await _timed(lambda _i: store.sessions.get_session(sid), reps),
        "load_active_ms": await _timed(lambda _i: store.transcript.load_active(small.id), reps),
        "update_meta_ms": await _timed(lambda i: store.meta.update_meta(sid, n=i), reps),
    }
    load = results["load_active_ms"]["mean"]
    compact_total = await _timed(compact, reps)
    results["archive_and_compact_ms"] = {  # minus the load_active each round does first
        k: round(v - load, 3) for k, v in compact_total.items()
    }
    return results


async def bench_engine(url: str, reps: int, pg_schema: str | None = None) -> dict[str, Any]:
    store = await SqlSessionStore.open(url, pg_schema=pg_schema)
    try:
        return await bench_ops(store, reps)
    finally:
        if pg_schema:
            async with store._engine.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA IF EXISTS "{pg_schema}" CASCADE'))
        await store.aclose()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"reps": args.reps}
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if "sqlite" in engines:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'state.db'}"
            out["sqlite"] = await bench_engine(url, args.reps)
    if "postgresql" in engines:
        schema = f"bench_ops_{uuid.uuid4().hex[:8]}"
        try:
            out["postgresql"] = await bench_engine(args.pg_url, args.reps, pg_schema=schema)
        except Exception as exc:  # no server: say so in the JSON, keep the SQLite figures
            out["postgresql"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--engines", default="sqlite,postgresql")
    p.add_argument("--pg-url", default=os.environ.get("HERMES_TEST_PG_URL") or PG_DEFAULT)
    return p.parse_args(argv)


if __name__ == "__main__":
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(json.dumps(asyncio.run(main(parse_args())), indent=1))
