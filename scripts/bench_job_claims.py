"""How fast due jobs are claimed when several workers compete for them; print JSON.

    python scripts/bench_job_claims.py --jobs 1000 --workers 4 [--url postgresql+asyncpg://...]

Assumptions: each "worker" is one store connection in this process (the real workers are
processes; the store's claim is one transaction either way); every job is due; each worker
claims in batches of `--batch` (the scheduler's `MAX_RUNNING` is 8) until nothing is left and
finishes each claim at once (no model call), so this is the claim path alone. Default: a SQLite
file in a temporary directory. Reported: wall time, claims per second, and duplicates (a job
claimed twice; must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from state import JobSpec, SqlSessionStore  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="due jobs (default 1000)")
    parser.add_argument("--workers", type=int, default=4, help="competing workers (default 4)")
    parser.add_argument("--batch", type=int, default=8, help="claims per tick (default 8)")
    parser.add_argument("--url", help="a database URL (default: a temporary SQLite file)")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace, url: str) -> dict[str, object]:
    stores = [await SqlSessionStore.open(url) for _ in range(args.workers)]
    try:
        now = time.time()
        for i in range(args.jobs):
            await stores[0].jobs.create(
                JobSpec(owner="terminal:local", target_kind="fresh", schedule=f"once:{now}",
                        prompt=f"job {i}", next_run_at=now - 1)
            )  # fmt: skip
        claimed: Counter[int] = Counter()

        async def worker(index: int) -> None:
            jobs = stores[index].jobs
            while True:
                got = await jobs.claim_due(
                    now=time.time(), worker=f"w{index}", lease_s=60, limit=args.batch
                )
                if not got:
                    return
                for job in got:
                    claimed[job.id] += 1
                    await jobs.finish(job.id, worker=f"w{index}", next_run_at=None, runs=1)

        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(args.workers)))
        seconds = time.perf_counter() - started
    finally:
        for store in stores:
            await store.aclose()
    return {
        "database": url.split(":", 1)[0],
        "jobs": args.jobs,
        "workers": args.workers,
        "batch": args.batch,
        "seconds": round(seconds, 3),
        "claims_per_s": round(args.jobs / seconds, 1),
        "claimed": len(claimed),
        "duplicates": sum(1 for n in claimed.values() if n > 1),
        "assumptions": "one connection per worker in one process; claim + finish, no model call",
    }


def main(argv: list[str] | None = None) -> int:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        result = asyncio.run(run(args, url))
    print(json.dumps(result, indent=2))
    return 0 if result["duplicates"] == 0 and result["claimed"] == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
