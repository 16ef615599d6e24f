"""Prometheus for the metrics: `PrometheusMetrics` records samples as `hermes_*` series, and
`MetricsServer` serves them at `GET /metrics` (aiohttp, no authentication).

The registry is private to each `PrometheusMetrics`, so several can live in one process (tests).
Labels only ever hold names from small fixed sets (platform, outcome, kind, reason, role, store
operation); `_label` turns anything that is not a short lowercase name into "other", so no user
content or id (all of which are numbers, mixed case or long) can reach a label. The server
listens on `gateway.metrics.host:port` (loopback by default); anything but `/metrics` is 404.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Self, assert_never

import structlog
from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from agent.config import PriceEntry
from agent.errors import ConfigError
from agent.pricing import estimate_cost_usd, price_for
from gateway.metrics import (
    BackgroundPass,
    CompactionEnded,
    CompactionStarted,
    JobRun,
    ModelCall,
    ProposalSettled,
    QueueDepth,
    Sample,
    StoreOp,
    TurnDone,
)

__all__ = ["MetricsServer", "PrometheusMetrics", "is_loopback_host"]

log = structlog.get_logger(__name__)

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
_STORE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
_SAFE_LABEL = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_MAX_OPEN_COMPACTIONS = 1024
_TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


class PrometheusMetrics:
    """Samples as Prometheus series on a private registry (so several can live in one process)."""

    def __init__(
        self,
        *,
        prices: Mapping[str, PriceEntry] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._prices = prices or {}
        self._clock = clock
        self._open: OrderedDict[str, tuple[str, float]] = OrderedDict()
        """Session id -> (reason, start) of a compaction under way; not exported."""
        self._adopted: OrderedDict[str, str] = OrderedDict()
        """Session id -> the kind of a proposal just adopted, for its `session:compress`."""
        self._prompt_tokens: dict[str, tuple[int, int]] = {}
        """Platform -> (cache read tokens, prompt tokens) so far, for the hit ratio."""
        self._define()

    def _define(self) -> None:
        r = self.registry
        self.turns = Counter("hermes_turns", "Inbound messages handled", ["platform", "outcome"],
                             registry=r)  # fmt: skip
        self.turn_seconds = Histogram(
            "hermes_turn_duration_seconds", "From a message's turn starting to its reply",
            ["platform"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.model_seconds = Histogram(
            "hermes_model_call_duration_seconds", "One model call, end to end",
            ["role", "outcome"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.compactions = Counter(
            "hermes_compactions", "Compactions by kind, reason and outcome",
            ["kind", "reason", "outcome"], registry=r,
        )  # fmt: skip
        self.compaction_wait = Histogram(
            "hermes_compaction_wait_seconds", "From compaction:start to session:compress",
            ["reason"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.passes = Counter(
            "hermes_background_passes", "End-of-turn passes (micro, batch prepared ahead)",
            ["kind", "outcome"], registry=r,
        )  # fmt: skip
        self.pass_seconds = Histogram(
            "hermes_background_pass_duration_seconds", "One end-of-turn pass, snapshot to proposal",
            ["kind"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.tokens = Counter("hermes_tokens", "Model tokens by kind", ["platform", "kind"],
                              registry=r)  # fmt: skip
        self.cache_hit_ratio = Gauge(
            "hermes_cache_hit_ratio", "Prompt tokens read from cache, share since start",
            ["platform"], registry=r,
        )  # fmt: skip
        self.cost = Counter("hermes_cost_usd", "Estimated model cost in US dollars",
                            ["platform"], registry=r)  # fmt: skip
        self.store_seconds = Histogram(
            "hermes_store_operation_duration_seconds", "One session store operation",
            ["op", "outcome"], buckets=_STORE_BUCKETS, registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge("hermes_queue_depth", "Messages waiting for their turn",
                                 ["platform"], registry=r)  # fmt: skip
        self.job_runs = Counter("hermes_job_runs", "Scheduled job runs by kind and outcome",
                                ["kind", "outcome"], registry=r)  # fmt: skip

    def record(self, sample: Sample) -> None:
        match sample:
            case TurnDone():
                self._turn(sample)
            case ModelCall(role=role, seconds=seconds, ok=ok):
                self.model_seconds.labels(role, _outcome(ok)).observe(seconds)
            case StoreOp(op=op, seconds=seconds, ok=ok):
                self.store_seconds.labels(_label(op), _outcome(ok)).observe(seconds)
            case CompactionStarted(session_id=session_id, reason=reason):
                self._open[session_id] = (reason, self._clock())
                while len(self._open) > _MAX_OPEN_COMPACTIONS:
                    self._open.popitem(last=False)
            case CompactionEnded():
                self._compaction_ended(sample)
            case BackgroundPass(kind=kind, outcome=outcome, seconds=seconds):
                self.pass_seconds.labels(kind).observe(seconds)
                if outcome != "proposed":  # a proposal is counted once it is settled
                    self.passes.labels(kind, outcome).inc()
            case ProposalSettled(session_id=session_id, kind=kind, adopted=adopted):
                self.passes.labels(kind, "adopted" if adopted else "dropped").inc()
                if adopted:
                    self._adopted[session_id] = kind
                    while len(self._adopted) > _MAX_OPEN_COMPACTIONS:
                        self._adopted.popitem(last=False)
            case QueueDepth(platform=platform, depth=depth):
                self.queue_depth.labels(_label(platform)).set(depth)
            case JobRun(kind=kind, outcome=outcome):
                self.job_runs.labels(_label(kind), _label(outcome)).inc()
            case unreachable:
                assert_never(unreachable)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)

    def _turn(self, sample: TurnDone) -> None:
        platform = _label(sample.platform)
        self.turns.labels(platform, sample.kind).inc()
        self.turn_seconds.labels(platform).observe(sample.seconds)
        opened = self._open.pop(sample.session_id, None)
        if opened is not None:  # started in this turn, never finished: refused or failed
            self.compactions.labels("batch", _label(opened[0]), "not_compacted").inc()
        usage = sample.usage
        if usage is None:
            return
        counts = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )
        for kind, count in zip(_TOKEN_KINDS, counts, strict=True):
            if count:
                self.tokens.labels(platform, kind).inc(count)
        read, prompt = self._prompt_tokens.get(platform, (0, 0))
        read, prompt = read + usage.cache_read_tokens, prompt + usage.prompt_tokens
        self._prompt_tokens[platform] = (read, prompt)
        if prompt:
            self.cache_hit_ratio.labels(platform).set(read / prompt)
        price = price_for(sample.model or "", self._prices) if sample.model else None
        if price is not None:
            self.cost.labels(platform).inc(estimate_cost_usd(usage, price))

    def _compaction_ended(self, sample: CompactionEnded) -> None:
        opened = self._open.pop(sample.session_id, None)
        reason = _label(sample.reason)
        kind = self._adopted.pop(sample.session_id, sample.kind)  # adoption names it first
        self.compactions.labels(kind, reason, "compacted").inc()
        if opened is not None:
            self.compaction_wait.labels(reason).observe(max(0.0, self._clock() - opened[1]))


def _label(value: str) -> str:
    """A label value from a fixed vocabulary; anything that does not look like one is "other"."""
    return value if _SAFE_LABEL.match(value) else "other"


def _outcome(ok: bool) -> str:
    return "ok" if ok else "error"


def is_loopback_host(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class MetricsServer:
    """Serves `metrics` at `http://host:port/metrics`; `port=0` picks a free one (see `port`)."""

    def __init__(self, metrics: PrometheusMetrics, *, host: str, port: int) -> None:
        self._metrics = metrics
        self._host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}/metrics"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._scrape)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"gateway.metrics: cannot listen on {self._host}:{self.port}: {exc.strerror}",
                key="gateway.metrics.port",
            ) from exc
        self._runner = runner
        self.port = runner.addresses[0][1]
        if not is_loopback_host(self._host):
            log.warning(
                "metrics_exposed",
                host=self._host,
                action=f"/metrics listens on {self._host} without authentication; keep it "
                "behind a firewall or proxy (or set gateway.metrics.host: 127.0.0.1)",
            )
        log.info("metrics_started", port=self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _scrape(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=self._metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )
