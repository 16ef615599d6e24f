"""The native-compaction gate reads the same trigger the local compressor fires at."""

from __future__ import annotations

import pytest

from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.providers.base import ProviderSettings
from cli.runtime import _LocalTrigger
from tests.fakes.provider import FakeProvider


@pytest.mark.parametrize(
    ("provider", "model", "window"),
    [
        ("openai-codex", "gpt-5.5", 272_000),  # the autoraised route: 85%, not the 0.75 floor
        ("openai", "gpt-5.6", 1_050_000),
        ("anthropic", "claude-x", 200_000),
    ],
)
def test_local_trigger_equals_the_compressor_threshold(
    provider: str, model: str, window: int
) -> None:
    """`_LocalTrigger` and `ContextCompressor` agree on every route, the gpt-5.5 autoraise too."""
    config = CompressionConfig(model_thresholds={"gpt-5.6": 0.4})
    engine = ContextCompressor(
        config, summarizer=FakeProvider(), summary_model="aux", provider=provider
    )
    engine.update_model(model, window)
    trigger = _LocalTrigger(config, ProviderSettings(provider=provider, model=model))
    trigger.context_length = window
    assert trigger() == engine.threshold_tokens
