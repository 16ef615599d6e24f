"""Scrape `/metrics` after a scripted Telegram session: the `hermes_*` counters hold the session.

Real python-telegram-bot against FakeTelegram, the real runtime on FakeLLM (Anthropic wire) and
SQLite, the real runner with `PrometheusMetrics`, and `/metrics` fetched over HTTP and parsed
with prometheus_client's text parser (https://prometheus.io/docs/instrumenting/exposition_formats/).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.pricing import estimate_cost_usd
from gateway.prometheus import MetricsServer, PrometheusMetrics
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import make_config, summary_responder
from tests.gateway.platform_drivers import TelegramDriver, wait_until

PRICE = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


async def _scrape(url: str) -> Samples:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        async with http.get(url) as response:
            assert response.status == 200
            text = await response.text()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over every series of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


async def test_metrics_after_a_scripted_session(
    fake_telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path
) -> None:
    """Four replies, /compress and /status on Telegram: turns by outcome, model calls by role,
    tokens equal to what the store recorded, their cost, one manual compaction and its wait,
    store operations, and an empty queue."""
    from cli.runtime import Runtime

    driver = TelegramDriver(fake_telegram)
    llm.responder = summary_responder()
    llm.script(*(Turn(text=f"Answer {n}, " + "words " * 30) for n in range(4)))
    config = make_config(
        llm,
        tmp_path / "state.db",
        gateway=driver.gateway_config(),
        pricing={"test-model": PRICE},
        model={"context_length": 4000},
        compression={"protect_first_n": 1, "protect_last_n": 2},
    )
    metrics = PrometheusMetrics(prices=config.pricing)
    async with await Runtime.start(config, tmp_path, {}, metrics=metrics) as runtime:
        runner = GatewayRunner(runtime, [driver.adapter()], metrics=metrics)
        await runner.start()
        try:
            async with MetricsServer(metrics, host="127.0.0.1", port=0) as server:
                texts = [f"note {n} " + "words " * 100 for n in range(4)] + ["/compress", "/status"]
                for n, text in enumerate(texts):
                    await driver.say("alice", text)
                    await wait_until(
                        lambda n=n: len(driver.replies("alice")) > n, what=f"reply {n + 1}"
                    )
                # A turn is recorded once its lane finishes it, just after the reply is out.
                await wait_until(
                    lambda: (
                        metrics.registry.get_sample_value(
                            "hermes_turn_duration_seconds_count", {"platform": "telegram"}
                        )
                        == len(texts)
                    ),
                    what="every turn recorded",
                )
                samples = await _scrape(server.url)
            session = (await runtime.store.sessions.list_sessions(limit=1))[0]
        finally:
            await runner.stop()

    assert driver.replies("alice")[4].startswith("Compacted:")
    assert _get(samples, "hermes_turns_total", platform="telegram", outcome="reply") == 4
    assert _get(samples, "hermes_turns_total", platform="telegram", outcome="command") == 2
    assert _get(samples, "hermes_turn_duration_seconds_count", platform="telegram") == 6
    assert _get(samples, "hermes_model_call_duration_seconds_count", role="main", outcome="ok") == 4
    assert _get(samples, "hermes_model_call_duration_seconds_count", role="summary", outcome="ok") == 1  # fmt: skip

    usage = session.usage  # what the store summed from the provider's usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    for kind, count in (
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("cache_read", usage.cache_read_tokens),
        ("cache_write", usage.cache_write_tokens),
    ):
        assert _get(samples, "hermes_tokens_total", platform="telegram", kind=kind) == count
    cost = estimate_cost_usd(usage, config.pricing["test-model"])
    assert _get(samples, "hermes_cost_usd_total", platform="telegram") == pytest.approx(cost)
    ratio = usage.cache_read_tokens / usage.prompt_tokens
    assert _get(samples, "hermes_cache_hit_ratio", platform="telegram") == pytest.approx(ratio)

    manual = {"kind": "batch", "reason": "manual", "outcome": "compacted"}
    assert _get(samples, "hermes_compactions_total", **manual) == 1
    assert _get(samples, "hermes_compaction_wait_seconds_count", reason="manual") == 1
    assert _total(samples, "hermes_store_operation_duration_seconds_count", op="append") >= 4
    assert _get(samples, "hermes_store_operation_duration_seconds_count", op="archive_and_compact", outcome="ok") == 1  # fmt: skip
    assert _get(samples, "hermes_queue_depth", platform="telegram") == 0
    assert not any("alice" in name or "1001" in str(labels) for name, labels in samples)
