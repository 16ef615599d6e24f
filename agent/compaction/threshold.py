"""Compaction thresholds and budgets: the seed's computed values as pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "SMALL_CONTEXT_FLOOR",
    "SMALL_CONTEXT_WINDOW",
    "Budgets",
    "compute_budgets",
    "estimate_margin",
    "output_reserve",
    "reply_reserve",
    "would_overflow",
    "request_max_tokens",
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
MAX_OUTPUT_SHARE = 0.25
"""The output budget reserved in the window is `max_tokens`, but never more than this share of
it: on an 8K local model a 4,096-token reply budget would leave the prompt only half."""
MIN_REQUEST_OUTPUT_TOKENS = 256
"""A request's `max_tokens` is cut to what the window leaves, but not below this."""
ESTIMATE_MARGIN_SHARE = 0.02
"""Share of the window kept free against the error of our token estimate."""


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
    output_reserve: int = 0
    """Tokens of the window kept free for the reply (the threshold never eats into them)."""


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


def output_reserve(context_length: int, max_tokens: int) -> int:
    """The reply's share of the window: `max_tokens`, at most a quarter of the window."""
    return max(0, min(max_tokens, int(context_length * MAX_OUTPUT_SHARE)))


def reply_reserve(context_length: int, max_tokens: int, configured: int | None = None) -> int:
    """The room every request leaves for the reply: `model.reply_reserve_tokens` when set (at
    most half the window), else `output_reserve`: min(`max_tokens`, 25% of the window). A
    request that would leave less is compacted first, never sent to be refused or cut short."""
    if configured is not None:
        return max(0, min(configured, context_length // 2))
    return output_reserve(context_length, max_tokens)


def would_overflow(context_length: int, prompt_tokens: int, reply_room: int) -> bool:
    """A request of `prompt_tokens` would not leave `reply_room` (at least a minimal reply)
    and our estimate's margin free in the window."""
    room = max(MIN_REQUEST_OUTPUT_TOKENS, reply_room)
    return prompt_tokens + room + estimate_margin(context_length) > context_length


def compute_budgets(
    context_length: int, threshold_ratio: float, target_ratio: float, *, max_tokens: int = 0
) -> Budgets:
    """threshold = window x ratio, but never into the output reserve (prompt + reply must fit);
    tail = threshold x target_ratio; summary cap = min(5%, 12K)."""
    reserve = output_reserve(context_length, max_tokens)
    threshold_tokens = min(int(context_length * threshold_ratio), context_length - reserve)
    return Budgets(
        context_length=context_length,
        threshold_ratio=threshold_ratio,
        threshold_tokens=threshold_tokens,
        tail_token_budget=int(threshold_tokens * target_ratio),
        max_summary_tokens=min(int(context_length * MAX_SUMMARY_WINDOW_RATIO), MAX_SUMMARY_TOKENS),
        output_reserve=reserve,
    )


def estimate_margin(context_length: int) -> int:
    """Room left for the error of our prompt estimate (we count without the model's tokenizer)."""
    return max(64, int(context_length * ESTIMATE_MARGIN_SHARE))


def request_max_tokens(max_tokens: int, context_length: int, prompt_tokens: int) -> int:
    """`max_tokens` for one request: what the window leaves after the prompt, if that is less.

    Servers count prompt + max_tokens against the window (vLLM, llama.cpp: "requested N tokens
    (P in the messages, M in the completion)"), so asking for more than is left is refused even
    when the reply would have been short. `prompt_tokens` is our estimate: a margin stays free.
    """
    left = context_length - prompt_tokens - estimate_margin(context_length)
    return max(MIN_REQUEST_OUTPUT_TOKENS, min(max_tokens, left))


def summary_budget(content_tokens: int, max_summary_tokens: int) -> int:
    """content x 0.20, at least 2,000, at most the cap (the cap wins on tiny windows)."""
    wanted = max(int(content_tokens * SUMMARY_RATIO), MIN_SUMMARY_TOKENS)
    return max(1, min(wanted, max_summary_tokens))
