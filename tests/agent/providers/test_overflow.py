"""Overflow errors, read for the window and prompt size they name: each server's real wording.

Sources: Anthropic "Errors" (invalid_request_error "prompt is too long: N tokens > M maximum");
OpenAI error code `context_length_exceeded`; llama-cpp-python and vLLM's OpenAI servers ("you
requested N tokens (P in the messages, M in the completion)"); llama.cpp's llama-server
(`exceed_context_size_error`); LM Studio's context overflow message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.errors import ContextTooLong
from agent.providers.base import ProviderRequest, ProviderSettings
from agent.providers.overflow import Overflow, parse_overflow
from agent.providers.registry import build_provider
from sim.llm_server import FakeLLM, OverflowStyle


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "prompt is too long: 215000 tokens > 200000 maximum",
            Overflow(window_tokens=200_000, prompt_tokens=215_000),
        ),
        (
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130123 tokens. Please reduce the length of the messages.",
            Overflow(window_tokens=128_000, prompt_tokens=130_123),
        ),
        (
            "This model's maximum context length is 8192 tokens. However, you requested 15109 "
            "tokens (11013 in the messages, 4096 in the completion). Please reduce the length "
            "of the messages or completion.",
            Overflow(window_tokens=8_192, prompt_tokens=11_013, completion_tokens=4_096),
        ),
        (
            "This model's maximum context length is 4096 tokens. However, your request has 5000 "
            "input tokens. Please reduce the length of the input messages.",
            Overflow(window_tokens=4_096, prompt_tokens=5_000),
        ),
        (
            "request (4476 tokens) exceeds the available context size (4096 tokens), try "
            "increasing it",
            Overflow(window_tokens=4_096, prompt_tokens=4_476),
        ),
        (
            "Trying to keep the first 4466 tokens when context the overflows. However, the model "
            "is loaded with context length of only 4096 tokens, which is not enough.",
            Overflow(window_tokens=4_096, prompt_tokens=4_466),
        ),
        ("the input length exceeds the context length", Overflow()),
    ],
)
def test_the_numbers_each_server_names_are_read(message: str, expected: Overflow) -> None:
    """Window, prompt and completion sizes come out of each wording; none are invented."""
    assert parse_overflow(message) == expected


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(window_tokens=1_000) as server:
        yield server


@pytest.mark.parametrize(
    ("style", "api", "prompt_counted"),
    [
        ("anthropic", "anthropic", True),
        ("openai", "openai", True),
        ("llama_cpp_python", "openai", True),
        ("vllm", "openai", True),
        ("llama_cpp", "openai", True),
    ],
)
async def test_the_sdk_error_reaches_the_agent_with_the_window(
    fake: FakeLLM, style: OverflowStyle, api: str, prompt_counted: bool
) -> None:
    """Through the real SDK, each server's overflow becomes ContextTooLong carrying its numbers."""
    fake.overflow = style
    base = fake.anthropic_base_url if api == "anthropic" else fake.openai_base_url
    provider = build_provider(
        ProviderSettings(
            provider="anthropic" if api == "anthropic" else "custom",
            model="m",
            base_url=base,
            api_key="k",
            max_retries=0,
            timeout_s=5,
        )
    )
    request = ProviderRequest(
        model="m", messages=[{"role": "user", "content": "x" * 8_000}], max_tokens=100
    )
    try:
        with pytest.raises(ContextTooLong) as raised:
            await provider.complete(request)
    finally:
        await provider.aclose()
    assert raised.value.window_tokens == 1_000
    assert (raised.value.prompt_tokens or 0) >= 2_000
