"""Threshold resolution and the seed's computed budgets."""

from __future__ import annotations

import pytest

from agent.compaction.threshold import compute_budgets, resolve_model_threshold, summary_budget
from agent.context_compressor import resolve_model_threshold as exported

BIG = 1_000_000
SMALL = 200_000


@pytest.mark.parametrize(
    ("model", "thresholds", "window", "expected"),
    [
        ("glm-5.2-1M", {"glm-5.2": 0.40, "glm-5.2-1M": 0.25}, BIG, 0.25),
        ("glm-5.2", {"glm-5.2": 0.40, "glm-5.2-1M": 0.25}, BIG, 0.40),
        ("openrouter/glm-5.2-air", {"glm-5.2": 0.40}, BIG, 0.40),
        ("gpt-5", {"glm-5.2": 0.40}, BIG, 0.50),
        ("gpt-5", {}, BIG, 0.50),
        ("claude-sonnet-4-6", {"claude-sonnet": 0.35}, SMALL, 0.75),
        ("claude-sonnet-4-6", {"claude-sonnet": 0.80}, SMALL, 0.80),
        ("claude-sonnet-4-6", {}, SMALL, 0.75),
        ("m", {}, 511_999, 0.75),
        ("m", {}, 512_000, 0.50),
        ("m", {"": 0.1}, BIG, 0.50),
    ],
)
def test_resolve_model_threshold(
    model: str, thresholds: dict[str, float], window: int, expected: float
) -> None:
    """Longest matching substring key wins, else the global; windows under 512K floor at 0.75."""
    assert resolve_model_threshold(model, 0.50, thresholds, window) == expected


def test_resolver_is_importable_from_the_compressor_module() -> None:
    """Plugins import `resolve_model_threshold` from agent.context_compressor, as the seed says."""
    assert exported is resolve_model_threshold


@pytest.mark.parametrize(
    ("window", "ratio", "target", "threshold", "tail", "max_summary"),
    [
        (200_000, 0.50, 0.20, 100_000, 20_000, 10_000),
        (1_000_000, 0.50, 0.20, 500_000, 100_000, 12_000),
        (32_000, 0.75, 0.20, 24_000, 4_800, 1_600),
        (400_000, 0.80, 0.10, 320_000, 32_000, 12_000),
    ],
)
def test_compute_budgets(
    window: int, ratio: float, target: float, threshold: int, tail: int, max_summary: int
) -> None:
    """threshold = window x ratio, tail = threshold x target, summary cap = min(5%, 12K)."""
    b = compute_budgets(window, ratio, target)
    assert (b.threshold_tokens, b.tail_token_budget, b.max_summary_tokens) == (
        threshold,
        tail,
        max_summary,
    )


@pytest.mark.parametrize(
    ("content", "cap", "expected"),
    [
        (1_000, 10_000, 2_000),
        (20_000, 10_000, 4_000),
        (80_000, 10_000, 10_000),
        (80_000, 12_000, 12_000),
        (1_000, 1_600, 1_600),
    ],
)
def test_summary_budget(content: int, cap: int, expected: int) -> None:
    """content x 0.20, at least 2,000, at most the cap."""
    assert summary_budget(content, cap) == expected
