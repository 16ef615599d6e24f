"""The one OpenAI-style usage split, in each wire shape that uses it: pure tables, no network.

Chat Completions: `usage.prompt_tokens` includes `prompt_tokens_details.cached_tokens`
(https://platform.openai.com/docs/api-reference/chat/object#chat/object-usage). Responses:
`usage.input_tokens` includes `input_tokens_details.cached_tokens`
(https://platform.openai.com/docs/api-reference/responses/object#responses/object-usage).
codex app-server: `TokenUsageBreakdown.inputTokens` includes `cachedInputTokens` (codex-rs
app-server-protocol v2).
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.codex._app_server_turn import APP_SERVER_USAGE
from agent.providers._convert_openai import CHAT_COMPLETIONS_USAGE
from agent.providers._responses_convert import RESPONSES_USAGE
from agent.providers._usage import UsageShape, usage_from_openai_style
from agent.providers.base import Usage


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 100, "completion_tokens": 5}, Usage(input_tokens=100, output_tokens=5)),
        (
            {
                "prompt_tokens": 100,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 80},
            },
            Usage(input_tokens=20, output_tokens=5, cache_read_tokens=80),
        ),
        (
            {
                "prompt_tokens": 100,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
            },
            Usage(input_tokens=10, output_tokens=1, cache_read_tokens=60, cache_write_tokens=30),
        ),
        ({}, Usage()),
    ],
)
def test_usage_from_openai(usage: dict[str, Any], expected: Usage) -> None:
    """prompt_tokens includes cached tokens, so the uncached input is the difference."""
    assert usage_from_openai_style(usage, CHAT_COMPLETIONS_USAGE) == expected


def test_usage_from_responses() -> None:
    """cached and cache-write tokens are carved out of input_tokens."""
    usage = usage_from_openai_style(
        {
            "input_tokens": 1000,
            "input_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 100},
            "output_tokens": 7,
        },
        RESPONSES_USAGE,
    )
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        300,
        600,
        100,
    )
    assert usage.prompt_tokens == 1000


@pytest.mark.parametrize(
    ("breakdown", "expected"),
    [
        (
            {"inputTokens": 1000, "cachedInputTokens": 800, "outputTokens": 20},
            Usage(input_tokens=200, output_tokens=20, cache_read_tokens=800),
        ),
        (
            {
                "inputTokens": 50,
                "cachedInputTokens": 30,
                "cacheWriteInputTokens": 10,
                "outputTokens": 2,
                "reasoningOutputTokens": 1,
                "totalTokens": 52,
            },
            Usage(input_tokens=10, output_tokens=2, cache_read_tokens=30, cache_write_tokens=10),
        ),
        ({}, Usage()),
    ],
)
def test_usage_from_app_server_breakdown(breakdown: dict[str, Any], expected: Usage) -> None:
    """The app-server's flat camelCase breakdown splits the same way."""
    assert usage_from_openai_style(breakdown, APP_SERVER_USAGE) == expected


@pytest.mark.parametrize(
    ("usage", "shape"),
    [
        (
            {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 40}},
            CHAT_COMPLETIONS_USAGE,
        ),
        ({"input_tokens": 0, "input_tokens_details": {"cached_tokens": 5}}, RESPONSES_USAGE),
        ({"inputTokens": 3, "cachedInputTokens": 2, "cacheWriteInputTokens": 2}, APP_SERVER_USAGE),
    ],
)
def test_inconsistent_counts_never_go_negative(usage: dict[str, Any], shape: UsageShape) -> None:
    """A server reporting more cached than prompt tokens yields 0 uncached input, not less."""
    result = usage_from_openai_style(usage, shape)
    assert result.input_tokens == 0
    assert result.cache_read_tokens > 0


@pytest.mark.parametrize(
    "usage",
    [{"prompt_tokens": None, "prompt_tokens_details": None}, {"prompt_tokens_details": {}}],
)
def test_nulls_count_as_zero(usage: dict[str, Any]) -> None:
    """Local servers send null counts and null details; they count as 0."""
    assert usage_from_openai_style(usage, CHAT_COMPLETIONS_USAGE) == Usage()
