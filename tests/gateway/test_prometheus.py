"""Metrics samples and their Prometheus series: names, labels, values; no user content in labels.

The exposition is read back with prometheus_client's own text parser, as Prometheus would
(https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format).
"""

from __future__ import annotations

from typing import Literal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.config import PriceEntry
from agent.context_engine import CompactionReason
from agent.events import CompactionBegan, CompactionCommitted, ModelSwitched, NativeCompaction
from agent.providers.base import Usage
from gateway.metrics import (
    BackgroundPass,
    CompactionEnded,
    CompactionStarted,
    JobRun,
    ModelCall,
    ProposalSettled,
    QueueDepth,
    StoreOp,
    TurnDone,
    samples_from_event,
)
from gateway.prometheus import PrometheusMetrics

PRICE = PriceEntry(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)


def scrape(metrics: PrometheusMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the exposition as {(name, labels): value}."""
    text = metrics.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:  # fmt: skip
    return samples[(name, frozenset(labels.items()))]


def test_a_turn_counts_tokens_cost_and_the_cache_hit_ratio() -> None:
    """A reply's usage becomes token counters by kind, its estimated cost, and the hit ratio."""
    metrics = PrometheusMetrics(prices={"sonnet": PRICE})
    usage = Usage(input_tokens=100, output_tokens=20, cache_read_tokens=300, cache_write_tokens=100)
    metrics.record(
        TurnDone(platform="telegram", kind="reply", seconds=1.5, usage=usage, model="sonnet-x")
    )
    samples = scrape(metrics)
    assert value(samples, "hermes_turns_total", platform="telegram", outcome="reply") == 1
    assert value(samples, "hermes_turn_duration_seconds_count", platform="telegram") == 1
    assert value(samples, "hermes_turn_duration_seconds_sum", platform="telegram") == 1.5
    for kind, count in (("input", 100), ("output", 20), ("cache_read", 300), ("cache_write", 100)):
        assert value(samples, "hermes_tokens_total", platform="telegram", kind=kind) == count
    assert value(samples, "hermes_cache_hit_ratio", platform="telegram") == pytest.approx(0.6)
    expected = (100 * 3.0 + 20 * 15.0 + 100 * 3.75 + 300 * 0.30) / 1_000_000
    assert value(samples, "hermes_cost_usd_total", platform="telegram") == pytest.approx(expected)


def test_a_compaction_counts_its_kind_reason_and_how_long_the_user_waited() -> None:
    """compaction:start then session:compress: one compaction, and the seconds between them."""
    now = [100.0]
    metrics = PrometheusMetrics(clock=lambda: now[0])
    for event in (
        CompactionBegan(session_id="s1", reason="threshold"),
        _committed(session_id="s1", reason="threshold"),
    ):
        sample = samples_from_event(event)
        assert sample is not None
        metrics.record(sample)
        now[0] += 2.5
    samples = scrape(metrics)
    labels = {"kind": "batch", "reason": "threshold", "outcome": "compacted"}
    assert value(samples, "hermes_compactions_total", **labels) == 1
    assert value(samples, "hermes_compaction_wait_seconds_sum", reason="threshold") == 2.5


def test_a_rotating_compaction_is_matched_by_the_old_session_id() -> None:
    """Under legacy rotation the end event names the new session; the old id pairs it up."""
    metrics = PrometheusMetrics(clock=lambda: 0.0)
    metrics.record(CompactionStarted(session_id="old", reason="manual"))
    end = samples_from_event(_committed(session_id="new", old_session_id="old", reason="manual"))
    assert end == CompactionEnded(session_id="old", kind="batch", reason="manual")
    metrics.record(end)
    assert value(scrape(metrics), "hermes_compaction_wait_seconds_count", reason="manual") == 1


def test_a_compaction_that_never_finished_is_counted_when_its_turn_ends() -> None:
    """A start with no end (refused, failed) is `not_compacted` once the session's turn is done."""
    metrics = PrometheusMetrics()
    metrics.record(CompactionStarted(session_id="s1", reason="context_too_long"))
    metrics.record(TurnDone(platform="discord", kind="error", seconds=0.1, session_id="s1"))
    labels = {"kind": "batch", "reason": "context_too_long", "outcome": "not_compacted"}
    assert value(scrape(metrics), "hermes_compactions_total", **labels) == 1


def test_native_compactions_micro_passes_model_calls_store_ops_and_queues() -> None:
    """Each sample kind lands in its own series."""
    metrics = PrometheusMetrics()
    native = samples_from_event(NativeCompaction(session_id="s", reason="manual"))
    assert native is not None
    for sample in (
        native,
        BackgroundPass(kind="micro", outcome="nothing", seconds=0.1),
        BackgroundPass(kind="micro", outcome="proposed", seconds=0.2),
        ProposalSettled(session_id="s9", kind="micro", adopted=False),
        ModelCall(role="main", seconds=0.7, ok=True),
        ModelCall(role="summary", seconds=2.0, ok=False),
        StoreOp(op="append", seconds=0.004, ok=True),
        QueueDepth(platform="http", depth=3),
    ):
        metrics.record(sample)
    samples = scrape(metrics)
    labels = {"kind": "native", "reason": "manual", "outcome": "compacted"}
    assert value(samples, "hermes_compactions_total", **labels) == 1
    assert value(samples, "hermes_background_passes_total", kind="micro", outcome="nothing") == 1
    assert value(samples, "hermes_background_passes_total", kind="micro", outcome="dropped") == 1
    assert ("hermes_background_passes_total", frozenset({("kind", "micro"), ("outcome", "proposed")})) not in samples  # fmt: skip
    assert value(samples, "hermes_background_pass_duration_seconds_count", kind="micro") == 2
    assert value(samples, "hermes_model_call_duration_seconds_count", role="summary", outcome="error") == 1  # fmt: skip
    assert value(samples, "hermes_store_operation_duration_seconds_count", op="append", outcome="ok") == 1  # fmt: skip
    assert value(samples, "hermes_queue_depth", platform="http") == 3


def test_job_runs_are_counted_by_kind_and_outcome() -> None:
    """`hermes_job_runs_total{kind,outcome}`: what became of each scheduled run."""
    metrics = PrometheusMetrics()
    for kind, outcome in (
        ("reminder", "ok"),
        ("job", "silent"),
        ("job", "failed"),
        ("job", "failed"),
    ):
        metrics.record(JobRun(kind=kind, outcome=outcome))  # type: ignore[arg-type]
    samples = scrape(metrics)
    assert value(samples, "hermes_job_runs_total", kind="reminder", outcome="ok") == 1
    assert value(samples, "hermes_job_runs_total", kind="job", outcome="silent") == 1
    assert value(samples, "hermes_job_runs_total", kind="job", outcome="failed") == 2


@pytest.mark.parametrize("hostile", ["123456789", "Alice", "rm -rf /", "x" * 40, "", "émoji😀"])
def test_labels_never_carry_ids_or_user_text(hostile: str) -> None:
    """A value that is not a short lowercase name (an id, a name, any text) becomes "other"."""
    metrics = PrometheusMetrics()
    metrics.record(StoreOp(op=hostile, seconds=0.01, ok=True))
    metrics.record(TurnDone(platform=hostile, kind="reply", seconds=0.1))
    text = metrics.exposition().decode()
    assert (hostile not in text) if hostile else True
    samples = scrape(metrics)
    assert value(samples, "hermes_turns_total", platform="other", outcome="reply") == 1


def test_an_adopted_micro_proposal_counts_as_a_micro_compaction() -> None:
    """Adoption emits the same compaction:start / session:compress for every proposal; the
    proposal settled just before names its kind, so a micro pass is not counted as batch."""
    metrics = PrometheusMetrics(clock=lambda: 0.0)
    for sample in (
        CompactionStarted(session_id="s1", reason="threshold"),
        ProposalSettled(session_id="s1", kind="micro", adopted=True),
        samples_from_event(_committed(session_id="s1", reason="threshold", kind="micro")),
        CompactionStarted(session_id="s1", reason="threshold"),
        samples_from_event(_committed(session_id="s1", reason="threshold")),
    ):
        assert sample is not None
        metrics.record(sample)
    samples = scrape(metrics)
    micro = {"kind": "micro", "reason": "threshold", "outcome": "compacted"}
    batch = {"kind": "batch", "reason": "threshold", "outcome": "compacted"}
    assert value(samples, "hermes_compactions_total", **micro) == 1
    assert value(samples, "hermes_compactions_total", **batch) == 1
    assert value(samples, "hermes_background_passes_total", kind="micro", outcome="adopted") == 1


def test_unknown_events_are_not_samples() -> None:
    """Only the events metrics count become samples."""
    assert samples_from_event(ModelSwitched(model="m", context_length=200_000)) is None


def _committed(
    *,
    session_id: str,
    reason: CompactionReason,
    old_session_id: str = "",
    kind: Literal["batch", "micro"] = "batch",
) -> CompactionCommitted:
    return CompactionCommitted(
        session_id=session_id,
        old_session_id=old_session_id,
        reason=reason,
        kind=kind,
        tokens_before=9_000,
        tokens_after=2_000,
        messages_before=40,
        messages_after=12,
        seconds=1.5,
    )


async def test_the_server_serves_the_text_format_at_metrics_only() -> None:
    """GET /metrics answers 200 in Prometheus' text format; any other path is 404."""
    import aiohttp

    from gateway.prometheus import MetricsServer

    metrics = PrometheusMetrics()
    metrics.record(QueueDepth(platform="telegram", depth=0))
    async with MetricsServer(metrics, host="127.0.0.1", port=0) as server:
        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async with http.get(server.url) as response:
                body = await response.text()
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain; version=")
            async with http.get(server.url.replace("/metrics", "/other")) as other:
                assert other.status == 404
    assert 'hermes_queue_depth{platform="telegram"} 0.0' in body


async def test_a_taken_port_is_a_config_error_naming_the_key() -> None:
    """A second server on the same port fails with the key to change, not a traceback."""
    from agent.errors import ConfigError
    from gateway.prometheus import MetricsServer

    async with MetricsServer(PrometheusMetrics(), host="127.0.0.1", port=0) as first:
        second = MetricsServer(PrometheusMetrics(), host="127.0.0.1", port=first.port)
        with pytest.raises(ConfigError, match="gateway.metrics"):
            await second.start()
