"""Compaction thresholds and budgets: the seed's computed values as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "SMALL_CONTEXT_FLOOR",
    "SMALL_CONTEXT_WINDOW",
    "Budgets",
    "compute_budgets",
    "resolve_model_threshold",
    "summary_budget",
]

SMALL_CONTEXT_WINDOW = 512_000
"""Windows below this many tokens get the small-context floor."""
SMALL_CONTEXT_FLOOR = 0.75
SUMMARY_RATIO = 0.20
"""Summary budget per token of compacted content (the seed's `_SUMMARY_RATIO`)."""
MIN_SUMMARY_TOKENS = 2_000
MAX_SUMMARY_TOKENS = 12_000
MAX_SUMMARY_WINDOW_RATIO = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """What one model's window allows: when to compact and how much to keep."""

    context_length: int
    threshold_ratio: float
    threshold_tokens: int
    """Compact when the prompt reaches this many tokens."""
    tail_token_budget: int
    """Tokens of recent messages kept verbatim."""
    max_summary_tokens: int


def resolve_model_threshold(
    model: str, threshold: float, model_thresholds: Mapping[str, float], context_length: int
) -> float:
    """The trigger ratio for `model`: longest matching substring key, else global; then the floor.

    Windows under 512K tokens are raised to at least 0.75 (raise-only: a higher value wins).
    """
    matches = [key for key in model_thresholds if key and key in model]
    ratio = model_thresholds[max(matches, key=len)] if matches else threshold
    if context_length < SMALL_CONTEXT_WINDOW:
        ratio = max(ratio, SMALL_CONTEXT_FLOOR)
    return ratio


def compute_budgets(context_length: int, threshold_ratio: float, target_ratio: float) -> Budgets:
    """threshold = window x ratio; tail = threshold x target_ratio; summary cap = min(5%, 12K)."""
    threshold_tokens = int(context_length * threshold_ratio)
    return Budgets(
        context_length=context_length,
        threshold_ratio=threshold_ratio,
        threshold_tokens=threshold_tokens,
        tail_token_budget=int(threshold_tokens * target_ratio),
        max_summary_tokens=min(int(context_length * MAX_SUMMARY_WINDOW_RATIO), MAX_SUMMARY_TOKENS),
    )


def summary_budget(content_tokens: int, max_summary_tokens: int) -> int:
    """content x 0.20, at least 2,000, at most the cap (the cap wins on tiny windows)."""
    wanted = max(int(content_tokens * SUMMARY_RATIO), MIN_SUMMARY_TOKENS)
    return max(1, min(wanted, max_summary_tokens))
