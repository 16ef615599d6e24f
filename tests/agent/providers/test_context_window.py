"""Context-window resolution: the well-known table, endpoint probes against FakeLLM, the default."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from agent.providers.context_window import (
    DEFAULT_CONTEXT_LENGTH,
    context_length_for,
    context_length_from_models,
    context_length_from_props,
    probe_context_length,
    resolve_context_length,
)
from sim.llm_server import FakeLLM


@pytest.mark.parametrize(
    ("model", "configured", "expected"),
    [
        ("claude-sonnet-4-6", None, 200_000),
        ("claude-sonnet-4-6[1m]", None, 1_000_000),
        ("anthropic/claude-sonnet-4.5-1m", None, 1_000_000),
        ("claude-opus-4-1m-preview", None, 200_000),
        ("gpt-4o-mini", None, 128_000),
        ("openai/gpt-4.1", None, 1_047_576),
        ("gpt-4", None, 8_192),
        ("gpt-5-mini", None, 400_000),
        ("o3-mini", None, 200_000),
        ("o4-mini", None, 200_000),
        ("llama3:8b", None, 8_192),
        ("meta-llama/Llama-3.1-8B-Instruct", None, 131_072),
        ("Qwen/Qwen2.5-7B-Instruct", None, 32_768),
        ("xo3-model", None, None),
        ("my-local-model", None, None),
        ("my-local-model", 65_536, 65_536),
        ("claude-haiku", 50_000, 50_000),
    ],
)
def test_context_length_for(model: str, configured: int | None, expected: int | None) -> None:
    """Config wins; otherwise the longest table key matching at a name boundary decides."""
    assert context_length_for(model, configured) == expected


@pytest.mark.parametrize(
    ("payload", "model", "expected"),
    [
        ({"data": [{"id": "a", "max_model_len": 32768}]}, "a", 32768),
        (
            {"data": [{"id": "a", "context_length": 100}, {"id": "b", "context_length": 200}]},
            "b",
            200,
        ),
        ({"data": [{"id": "x", "top_provider": {"context_length": 300}}]}, "x", 300),
        ({"data": [{"id": "only", "meta": {"n_ctx_train": 4096}}]}, "other-name", 4096),
        ({"data": [{"id": "a"}, {"id": "b"}]}, "c", None),
        ({"data": "nonsense"}, "a", None),
        ([], "a", None),
    ],
)
def test_context_length_from_models(payload: Any, model: str, expected: int | None) -> None:
    """The models listing yields the window from whichever field the server uses."""
    assert context_length_from_models(payload, model) == expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"default_generation_settings": {"n_ctx": 8192}}, 8192),
        ({"n_ctx": 2048}, 2048),
        ({}, None),
        (None, None),
    ],
)
def test_context_length_from_props(payload: Any, expected: int | None) -> None:
    """llama.cpp's /props reports the running n_ctx."""
    assert context_length_from_props(payload) == expected


async def test_probe_prefers_models_metadata() -> None:
    """A vLLM-style listing with max_model_len answers the probe."""
    async with FakeLLM(models={"local": {"max_model_len": 16_384}}, n_ctx=4096) as fake:
        found = await probe_context_length(fake.openai_base_url, "k", "local", timeout_s=2)
    assert found == 16_384
    assert fake.requests[0].headers["authorization"] == "Bearer k"


async def test_probe_uses_props_before_training_context() -> None:
    """llama.cpp: the running n_ctx from /props beats n_ctx_train from /v1/models."""
    async with FakeLLM(models={"gguf": {"meta": {"n_ctx_train": 131_072}}}, n_ctx=8192) as fake:
        found = await probe_context_length(fake.openai_base_url, None, "gguf", timeout_s=2)
    assert found == 8192
    assert [r.path for r in fake.requests] == ["/v1/models", "/props"]


async def test_probe_falls_back_to_training_context() -> None:
    """Without /props, llama.cpp's n_ctx_train is the last answer."""
    async with FakeLLM(models={"gguf": {"meta": {"n_ctx_train": 131_072}}}) as fake:
        assert (
            await probe_context_length(fake.openai_base_url, None, "gguf", timeout_s=2) == 131_072
        )


async def test_probe_of_a_dead_endpoint_is_none(closed_port_url: str) -> None:
    """Nothing listening: the probe answers None quickly instead of raising."""
    assert await probe_context_length(closed_port_url + "/v1", None, "m", timeout_s=1) is None


async def test_resolve_order_and_default_warning() -> None:
    """Configured, table, probe, then 128K with a logged warning."""
    models = {"mystery": {"context_length": 12_345}, "other": {"context_length": 1}}
    async with FakeLLM(models=models) as fake:
        assert await resolve_context_length("mystery", 999) == 999
        assert (
            await resolve_context_length("gpt-4o", None, base_url=fake.openai_base_url) == 128_000
        )
        assert len(fake.requests) == 0
        assert (
            await resolve_context_length("mystery", None, base_url=fake.openai_base_url) == 12_345
        )
        with capture_logs() as logs:
            found = await resolve_context_length(
                "unknown-thing", None, base_url=fake.openai_base_url
            )
    assert found == DEFAULT_CONTEXT_LENGTH
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["context_length_defaulted"]
