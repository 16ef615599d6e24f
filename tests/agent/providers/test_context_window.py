"""Context-window resolution: the well-known table, endpoint probes against FakeLLM, the default."""

from __future__ import annotations

from pathlib import Path
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
    resolve_window,
)
from agent.providers.window_memory import WindowMemory
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
    # The servers' endpoints are asked at once (one timeout in all); the answers rank as above.
    assert sorted(r.path for r in fake.requests) == [
        "/api/ps",
        "/api/show",
        "/api/v0/models/gguf",
        "/props",
        "/v1/models",
    ]


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


async def test_a_local_server_reports_its_own_window_before_the_table() -> None:
    """A custom endpoint serving a 32K-class model with an 8K context: the server's `/props`
    n_ctx (llama.cpp) wins over the table's 32,768 for "qwen"; hosted routes keep the table."""
    async with FakeLLM(n_ctx=8_192) as fake:
        local = await resolve_window(
            "qwen2.5-7b-instruct", None, base_url=fake.openai_base_url, local=True
        )
        hosted = await resolve_window("qwen2.5-7b-instruct", None, base_url=fake.openai_base_url)
    assert (local.tokens, local.source) == (8_192, "endpoint")
    assert (hosted.tokens, hosted.source) == (32_768, "table")


@pytest.mark.parametrize(
    ("ollama", "lmstudio", "expected"),
    [
        ({"mymodel": {"context_length": 16_384}}, {}, 16_384),  # Ollama /api/ps, loaded
        ({"mymodel": {"num_ctx": 12_288}}, {}, 12_288),  # Ollama /api/show parameters
        ({}, {"mymodel": {"loaded_context_length": 6_144}}, 6_144),  # LM Studio /api/v0
        ({}, {}, None),
    ],
)
async def test_ollama_and_lmstudio_windows_are_probed(
    ollama: dict[str, Any], lmstudio: dict[str, Any], expected: int | None
) -> None:
    """Ollama answers with the loaded model's context (`/api/ps`) or `num_ctx` among its
    parameters (`/api/show`); LM Studio with `loaded_context_length` (REST API v0)."""
    async with FakeLLM() as fake:
        fake.ollama, fake.lmstudio = ollama, lmstudio
        found = await probe_context_length(fake.openai_base_url, None, "mymodel", timeout_s=2)
    assert found == expected


async def test_a_learned_window_beats_probing_and_the_table() -> None:
    """A window an overflow error taught us comes right after the configured one."""
    async with FakeLLM(n_ctx=32_000) as fake:
        found = await resolve_window(
            "llama3.1", None, base_url=fake.openai_base_url, learned=8_192, local=True
        )
        requests = len(fake.requests)
    assert (found.tokens, found.source, requests) == (8_192, "learned", 0)


def test_window_memory_round_trips_and_survives_garbage(tmp_path: Path) -> None:
    """Learned windows are kept per endpoint and model; an unreadable file is ignored."""
    memory = WindowMemory(tmp_path / "context_windows.json")
    assert memory.learned("http://127.0.0.1:8080/v1", "m") is None
    memory.remember("http://127.0.0.1:8080/v1/", "m", 8_192)
    memory.remember("http://other/v1", "m", 4_096)
    assert (
        WindowMemory(tmp_path / "context_windows.json").learned("http://127.0.0.1:8080/v1", "m")
        == 8_192
    )
    (tmp_path / "context_windows.json").write_text("{broken", encoding="utf-8")
    assert memory.learned("http://other/v1", "m") is None
