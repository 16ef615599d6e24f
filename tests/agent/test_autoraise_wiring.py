"""The Codex gpt-5.5 autoraise reaches the compressor's trigger and the operator's notice."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import CompressionConfig, HermesConfig, ModelConfig
from agent.context_compressor import ContextCompressor
from agent.providers.base import ProviderSettings
from cli.runtime import _autoraise_notices
from tests.fakes.provider import FakeProvider

WINDOW = 272_000


@pytest.mark.parametrize(
    ("provider", "model", "autoraise", "ratio"),
    [
        ("openai-codex", "gpt-5.5", True, 0.85),
        ("openai-codex", "gpt-5.5", False, 0.75),
        ("openai", "gpt-5.5", True, 0.75),
        ("openrouter", "gpt-5.5", True, 0.75),
        ("openai-codex", "gpt-5.6", True, 0.75),
    ],
)
def test_trigger_is_raised_only_on_codex_gpt55(
    provider: str, model: str, autoraise: bool, ratio: float
) -> None:
    """85% on the Codex OAuth route with gpt-5.5; every other route keeps its threshold."""
    engine = ContextCompressor(
        CompressionConfig(codex_gpt55_autoraise=autoraise),
        summarizer=FakeProvider(),
        summary_model="m",
        provider=provider,
    )
    engine.update_model(model, WINDOW)
    assert engine.threshold_tokens == int(WINDOW * ratio)


def _config(**compression: object) -> HermesConfig:
    return HermesConfig(
        model=ModelConfig(provider="openai-codex", default="gpt-5.5"),
        compression=CompressionConfig(**compression),  # type: ignore[arg-type]
    )


SETTINGS = ProviderSettings(provider="openai-codex", model="gpt-5.5", api_key="k")


def test_notice_once_per_profile(tmp_path: Path) -> None:
    """The notice shows on the first start only; the marker file remembers it."""
    first = _autoraise_notices(_config(), SETTINGS, tmp_path, WINDOW)
    assert len(first) == 1 and "codex_gpt55_autoraise false" in first[0]
    assert _autoraise_notices(_config(), SETTINGS, tmp_path, WINDOW) == []


def test_no_notice_when_hidden_or_off(tmp_path: Path) -> None:
    """Either opt-out silences the notice."""
    assert (
        _autoraise_notices(_config(codex_gpt55_autoraise_notice=False), SETTINGS, tmp_path, WINDOW)
        == []
    )
    assert (
        _autoraise_notices(_config(codex_gpt55_autoraise=False), SETTINGS, tmp_path, WINDOW) == []
    )
