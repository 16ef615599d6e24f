"""What `/ready` asks before it says ready: the runner accepts turns, a model is configured, the
store answers in time, its disk has room, and a configured model endpoint answers at all.

Kubernetes' readiness contract: a pod that answers 503 gets no traffic until it answers 200
again, so every check here is cheap and bounded. The model endpoint is probed only when
`model.base_url` names one (a local or custom server; a hosted default is not probed on every
poll): a GET of its `/models` within the probe's deadline, where any HTTP answer (even a 401 or
a 404) means the server is up and only a refused or silent connection means it is dead. The
answer is kept for `MODEL_PROBE_TTL_S`, so frequent polls cost one probe.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import aiohttp
import structlog

if TYPE_CHECKING:
    from gateway.run import GatewayRunner

__all__ = ["MIN_FREE_BYTES", "MODEL_PROBE_TTL_S", "Readiness"]

MIN_FREE_BYTES = 8 * 1024 * 1024
"""Below this much free space on the database's disk a turn's write would fail: not ready."""
MODEL_PROBE_TTL_S = 5.0

log = structlog.get_logger(__name__)


class Readiness:
    """The one reason the server is not ready, or None."""

    def __init__(
        self,
        runner: GatewayRunner,
        *,
        timeout_s: float,
        min_free_bytes: int = MIN_FREE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runner = runner
        self._timeout_s = timeout_s
        self._min_free_bytes = min_free_bytes
        self._clock = clock
        self._probed: tuple[float, str | None] | None = None

    async def problem(self) -> str | None:
        runner = self._runner
        if not runner.accepting:
            return "shutting down"
        if not runner.config.model.default:
            return "no model configured (model.default)"
        try:
            async with asyncio.timeout(self._timeout_s):
                await runner.store.sessions.get_session("readiness-probe")
        except Exception as exc:  # any failure of the store means not ready
            log.warning("http_not_ready", reason=type(exc).__name__)
            return "the session store is not answering"
        free = runner.store.disk_free_bytes()
        if free is not None and free < self._min_free_bytes:
            return f"the disk of the session store is full ({free:,} bytes free)"
        return await self._model_problem()

    async def _model_problem(self) -> str | None:
        base_url = self._runner.config.model.base_url
        if not base_url:
            return None
        now = self._clock()
        if self._probed is not None and now - self._probed[0] < MODEL_PROBE_TTL_S:
            return self._probed[1]
        problem = await self._probe(base_url.rstrip("/") + "/models")
        self._probed = (now, problem)
        if problem is not None:
            log.warning("http_not_ready", reason="model_endpoint", url=base_url)
        return problem

    async def _probe(self, url: str) -> str | None:
        try:
            async with asyncio.timeout(self._timeout_s), aiohttp.ClientSession() as session:
                async with session.get(url) as response:
                    await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return f"the model endpoint is not answering ({type(exc).__name__})"
        return None
