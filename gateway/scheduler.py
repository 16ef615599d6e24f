"""Firing due jobs exactly once across workers: the tick loop, claims, and their renewal.

Every `hermes gateway run` worker runs a `JobScheduler`. Each tick (`schedule.tick_s`, jittered
by a fifth so workers drift apart) claims due jobs atomically in the store
(`SqlJobStore.claim_due`): a job goes to one worker only. Jobs that deliver to a platform chat
are claimed by a worker that can send there now (the elected poller), unless they have waited
too long, so a chat nobody can reach still gets its reply stored in its session. A claimed run
keeps its claim renewed while it runs; a worker killed mid-run stops renewing, the claim
expires, and another worker redoes the run once (`gateway.job_runs` decides what happens).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
import uuid
from collections.abc import Callable

import structlog

from agent.config import HermesConfig
from gateway.election import ElectedAdapter
from gateway.job_runs import JobRunner, RunResult
from gateway.metrics import NO_METRICS, JobRun, MetricsRecorder
from gateway.run import GatewayRunner
from state import JobInfo, SqlJobStore

__all__ = ["STRANDED_AFTER_S", "JobScheduler"]

log = structlog.get_logger(__name__)

STRANDED_AFTER_S = 60.0
"""A job for a chat no worker can send to runs anyway after this long (its reply is stored)."""
MAX_RUNNING = 8
"""Runs one worker has in flight at most; the rest wait for a later tick (or another worker)."""


class JobScheduler:
    """Claims and runs due jobs on one worker. `start` ticks in the background; tests call
    `tick` themselves with an injected clock and await `wait_idle`."""

    def __init__(
        self,
        runner: GatewayRunner,
        jobs: SqlJobStore,
        config: HermesConfig,
        *,
        clock: Callable[[], float] = time.time,
        metrics: MetricsRecorder = NO_METRICS,
        worker: str | None = None,
    ) -> None:
        self._runner = runner
        self._jobs = jobs
        self._settings = config.schedule
        self._clock = clock
        self._metrics = metrics
        self.worker = worker or f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._runs = JobRunner(runner, jobs, config, worker=self.worker, clock=clock)
        self._loop: asyncio.Task[None] | None = None
        self._running: dict[int, asyncio.Task[RunResult | None]] = {}
        self.results: list[RunResult] = []
        """What each run of this worker came to, in order (for tests and logs)."""

    async def start(self) -> None:
        if self._loop is None:
            self._loop = asyncio.create_task(self._forever(), name="job-scheduler")

    async def stop(self, *, timeout_s: float) -> None:
        """Stop ticking; runs in flight get `timeout_s` to finish, then are cancelled (their
        claims are let go, so another worker redoes them)."""
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.wait({self._loop})
            self._loop = None
        running = list(self._running.values())
        if running:
            _, pending = await asyncio.wait(running, timeout=timeout_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)

    async def tick(self) -> int:
        """Claim what is due now and start running it; returns how many runs were claimed."""
        room = MAX_RUNNING - len(self._running)
        if room <= 0:
            return 0
        claimed = await self._jobs.claim_due(
            now=self._clock(),
            worker=self.worker,
            lease_s=self._settings.lease_s,
            platforms=self._sendable(),
            stranded_after_s=STRANDED_AFTER_S,
            limit=room,
        )
        for job in claimed:
            task = asyncio.create_task(self._run(job), name=f"job:{job.id}")
            self._running[job.id] = task
            task.add_done_callback(self._forget(job.id))
        return len(claimed)

    def _forget(self, job_id: int) -> Callable[[asyncio.Task[RunResult | None]], None]:
        def done(_task: asyncio.Task[RunResult | None]) -> None:
            self._running.pop(job_id, None)

        return done

    async def wait_idle(self) -> None:
        """Return once no run of this worker is in flight."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    def _sendable(self) -> list[str]:
        """The platforms this worker can send to now (an elected one only while it leads)."""
        return [
            name
            for name, adapter in self._runner.adapters.items()
            if not isinstance(adapter, ElectedAdapter) or adapter.is_leader
        ]

    async def _forever(self) -> None:
        """Tick at once (runs missed while no worker was up fire on start), then every
        `tick_s`, jittered."""
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a task root: the next tick tries again
                log.warning("job_tick_failed", error=str(exc)[:300])
            tick_s = self._settings.tick_s
            await asyncio.sleep(tick_s * random.uniform(0.8, 1.2))  # noqa: S311 (jitter)

    async def _run(self, job: JobInfo) -> RunResult | None:
        """One claimed run, its claim renewed meanwhile; never raises but CancelledError."""
        renewer = asyncio.create_task(self._renew(job.id), name=f"job-renew:{job.id}")
        try:
            result = await self._runs.run(job)
        except asyncio.CancelledError:
            await asyncio.shield(self._runs.release(job))
            raise
        except Exception as exc:  # a task root: the run is recorded as failed, the loop goes on
            log.error("job_run_crashed", job_id=job.id, exc_info=exc)
            result = await self._runs.crashed(job, exc)
        finally:
            renewer.cancel()
            await asyncio.wait({renewer})
        if result is not None:
            self.results.append(result)
            self._metrics.record(JobRun(kind=job.kind, outcome=result.outcome))
        return result

    async def _renew(self, job_id: int) -> None:
        lease_s = self._settings.lease_s
        while True:
            await asyncio.sleep(lease_s / 3)
            try:
                kept = await self._jobs.renew(
                    job_id, worker=self.worker, until=self._clock() + lease_s
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next renewal tries again before the claim runs out
                log.warning("job_renew_failed", job_id=job_id, error=str(exc)[:200])
                continue
            if not kept:
                log.warning("job_claim_lost", job_id=job_id)
                return
