"""What the owner filter costs a search (issue 24): the same queries unscoped (the shell's view)
and scoped to one owner (what every tool does), on SQLite or PostgreSQL; prints JSON.

    python scripts/bench_owner_search.py [--messages 100000] [--owners 20] [--reps 20]
                                         [--engines sqlite,postgresql] [--pg-url URL]

Assumptions, stated in the output too: `--owners` owners share the messages evenly except one
"small" owner with 0.5% of them; every message holds the common word `cases`, one in 1,000 the
rare word `zephyrquartz`; messages are ~120 characters. Milliseconds per search (best and
median of `--reps`), limit 5 as `session_search` asks, the newest-window ranking as shipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import text  # noqa: E402

from state import ReadScope, SqlSessionStore  # noqa: E402

PG_DEFAULT = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
SESSIONS_PER_OWNER = 5
BATCH = 1_000


def _owner_of(n: int, owners: int) -> str:
    if n % 200 == 0:
        return "http:small"  # 0.5% of the messages
    return f"http:o{n % owners}"


async def _fill(store: SqlSessionStore, messages: int, owners: int) -> None:
    names = {_owner_of(n, owners) for n in range(max(messages, 400))}
    sessions: dict[str, list[str]] = {}
    for name in sorted(names):
        sessions[name] = [
            (await store.sessions.create_session(platform="bench", owner=name)).id
            for _ in range(SESSIONS_PER_OWNER)
        ]
    pending: dict[str, list[Any]] = {}
    for n in range(messages):
        owner = _owner_of(n, owners)
        session = sessions[owner][n % SESSIONS_PER_OWNER]
        rare = " zephyrquartz" if n % 1_000 == 7 else ""
        body = f"message {n} about the usual cases and what was decided{rare} " + "x" * 40
        pending.setdefault(session, []).append({"role": "user", "content": body})
        if sum(len(v) for v in pending.values()) >= BATCH:
            for sid, batch in pending.items():
                await store.transcript.append(sid, batch)
            pending = {}
    for sid, batch in pending.items():
        await store.transcript.append(sid, batch)


async def _timed(
    store: SqlSessionStore, query: str, owner: str | None, reps: int
) -> dict[str, Any]:
    view = store.view(ReadScope(owner=owner)) if owner else None
    samples, hits = [], 0
    for _ in range(reps + 2):
        started = time.perf_counter()
        if view is None:
            found = await store.search.search(query, limit=5, superseded_summaries=False)
        else:
            found = await view.search(query, limit=5, superseded_summaries=False)
        samples.append((time.perf_counter() - started) * 1000)
        hits = len(found)
    samples = samples[2:]  # warm-up
    return {"best_ms": round(min(samples), 2), "p50_ms": round(statistics.median(samples), 2),
            "hits": hits}  # fmt: skip


async def _bench(url: str, pg_schema: str | None, args: argparse.Namespace) -> dict[str, Any]:
    store = await SqlSessionStore.open(url, pg_schema=pg_schema)
    try:
        started = time.perf_counter()
        await _fill(store, args.messages, args.owners)
        filled_s = time.perf_counter() - started
        results: dict[str, Any] = {"fill_s": round(filled_s, 1)}
        for query in ("cases", "zephyrquartz"):
            for label, owner in (("unscoped", None), ("big_owner", "http:o7"),
                                 ("small_owner", "http:small")):  # fmt: skip
                results[f"{query}:{label}"] = await _timed(store, query, owner, args.reps)
        return results
    finally:
        if pg_schema is not None:
            async with store._engine.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA "{pg_schema}" CASCADE'))
        await store.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--owners", type=int, default=20)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--engines", default="sqlite")
    parser.add_argument("--pg-url", default=PG_DEFAULT)
    args = parser.parse_args()
    out: dict[str, Any] = {
        "assumptions": {
            "messages": args.messages,
            "owners": args.owners,
            "small_owner_share": 0.005,
            "sessions_per_owner": SESSIONS_PER_OWNER,
            "common_word": "cases (every message)",
            "rare_word": "zephyrquartz (1 in 1,000)",
            "limit": 5,
        }
    }
    for engine in args.engines.split(","):
        if engine == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
                out["sqlite"] = await _bench(url, None, args)
        else:
            out["postgresql"] = await _bench(args.pg_url, f"b_{uuid.uuid4().hex[:10]}", args)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
