"""Token estimates without a tokenizer: chars/4 baseline, calibrated per model from real usage."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.media.image_fit import estimate_image_tokens
from agent.media.marks import MARK_OPEN
from agent.messages import ChatMessage

if TYPE_CHECKING:
    from agent.providers.base import ToolSpec

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenCalibrator",
    "estimate_message_tokens_rough",
    "estimate_messages_tokens_rough",
    "estimate_tool_specs_tokens",
    "estimate_tokens_rough",
]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
"""Role, separators and framing the wire adds around every message."""
NON_TEXT_BLOCK_TOKENS = 1_000
"""A content block without text (an image, a document) counts as this many tokens."""
MIN_RATIO = 0.5
MAX_RATIO = 6.0
"""CJK text can cost ~1 token per character, i.e. 4x the chars/4 baseline; leave headroom."""
MIN_DELTA_ROUGH = 256
"""Ignore growth smaller than this: too noisy to learn a ratio from."""
EMA_WEIGHT = 0.3
SAVE_STEP = 0.005
"""A fit is handed to `on_change` (kept for later processes) when its ratio moved this much."""
MAX_OVERHEAD_TOKENS = 32_000
"""Cap on the fixed per-request part, so one odd report cannot inflate every estimate."""


def estimate_tokens_rough(text: str) -> int:
    """chars/4, rounded up; fine for English and code, 34-52% low for non-Latin text."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_message_tokens_rough(msg: ChatMessage) -> int:
    """Content, tool-call names and arguments, referenced images (on the dearer of Anthropic's
    and OpenAI's rules, `agent.media.image_fit`), and the per-message overhead."""
    content = msg.get("content")
    chars = 0
    extra = MESSAGE_OVERHEAD_TOKENS
    if isinstance(content, str):
        chars = len(content)
    elif content:
        for block in content:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str):
                chars += len(text)
            else:
                extra += NON_TEXT_BLOCK_TOKENS
    for ref in msg.get("_media") or ():  # images the model will see (`agent.media.attach`)
        if isinstance(ref, dict) and ref.get("kind") == "image":
            extra += estimate_image_tokens(ref.get("width"), ref.get("height"))
    if msg.get("role") == "tool" and isinstance(content, str) and MARK_OPEN in content:
        # images `recall` brings back (size unknown here: counted as the largest)
        extra += content.count(MARK_OPEN) * estimate_image_tokens(None, None)
    calls = msg.get("tool_calls")
    if calls:
        for call in calls:
            fn = call.get("function") or {}
            chars += len(fn.get("name") or "") + len(fn.get("arguments") or "") + 16
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN + extra


def estimate_tool_specs_tokens(specs: Sequence[ToolSpec]) -> int:
    """Rough tokens of the tool schemas a request carries (name, description, JSON schema)."""
    return sum(
        estimate_tokens_rough(s.name + s.description + json.dumps(s.parameters)) for s in specs
    )


def estimate_messages_tokens_rough(messages: Sequence[ChatMessage]) -> int:
    """Sum of `estimate_message_tokens_rough` over the list."""
    return sum(map(estimate_message_tokens_rough, messages))


@dataclass(slots=True)
class _ModelFit:
    ratio: float = 1.0
    overhead: int = 0
    last_rough: int = 0
    last_real: int = 0
    samples: int = 0


class TokenCalibrator:
    """Learns, per model, how real prompt tokens relate to the rough estimate.

    The ratio is learned from the *growth* between two reports (real delta / rough delta), which
    cancels the fixed cost of tool schemas and wire framing; that fixed part is kept separately
    as `overhead`. Until two usable reports exist the ratio is 1.0.
    """

    def __init__(self, on_change: Callable[[str, float, int], None] | None = None) -> None:
        self._fits: dict[str, _ModelFit] = {}
        self._on_change = on_change
        """Told (model, ratio, overhead) when a model's fit moves by more than `SAVE_STEP`, so a
        runtime can keep it for the next process (a one-shot `chat -q` starts calibrated)."""
        self._saved: dict[str, float] = {}

    def seed(self, model: str, ratio: float, overhead: int = 0) -> None:
        """Start `model` from a fit an earlier process learned (one sample's weight)."""
        fit = self._fits.setdefault(model, _ModelFit())
        if fit.samples == 0:
            fit.ratio, fit.overhead, fit.samples = _clamp(ratio), max(0, overhead), 1
            self._saved[model] = fit.ratio

    def _changed(self, model: str) -> None:
        fit = self._fits[model]
        if self._on_change is None or fit.samples == 0:
            return
        if abs(fit.ratio - self._saved.get(model, 1.0)) > SAVE_STEP:
            self._saved[model] = fit.ratio
            self._on_change(model, fit.ratio, fit.overhead)

    def observe(self, model: str, rough: int, real: int) -> None:
        """Record one report: `rough` estimated for the messages sent, `real` prompt tokens billed."""
        if rough <= 0 or real <= 0:
            return
        fit = self._fits.setdefault(model, _ModelFit())
        grown = rough - fit.last_rough
        if fit.last_rough and grown >= MIN_DELTA_ROUGH and real > fit.last_real:
            sample = _clamp((real - fit.last_real) / grown)
            fit.ratio = sample if fit.samples == 0 else _ema(fit.ratio, sample)
            fit.samples += 1
        fit.overhead = min(MAX_OVERHEAD_TOKENS, max(0, real - round(rough * fit.ratio)))
        fit.last_rough, fit.last_real = rough, real
        self._changed(model)

    def correct(self, model: str, rough: int, real: int) -> None:
        """A server's own count of a whole prompt it refused (`real`, for `rough` estimated).

        Without earlier reports the ratio is taken from this one count: a refused prompt is
        large, so the fixed part is small beside it, and under-counting by a third is what made
        it overflow. With earlier reports it is one more sample.
        """
        if rough <= 0 or real <= 0:
            return
        fit = self._fits.setdefault(model, _ModelFit())
        if fit.samples == 0 and rough >= MIN_DELTA_ROUGH:
            fit.ratio = _clamp(real / rough)
            fit.samples = 1
            fit.overhead = max(0, real - round(rough * fit.ratio))
            fit.last_rough, fit.last_real = rough, real
            self._changed(model)
            return
        if real > round(rough * fit.ratio) + fit.overhead:  # we under-counted: never again
            fit.ratio = _clamp(max(fit.ratio, (real - fit.overhead) / rough))
        self.observe(model, rough, real)

    def ratio(self, model: str) -> float:
        fit = self._fits.get(model)
        return fit.ratio if fit else 1.0

    def scale(self, model: str, rough: int) -> int:
        """Rough tokens of some messages in the model's real units (no fixed overhead)."""
        return round(rough * self.ratio(model))

    def overhead(self, model: str) -> int:
        """Fixed tokens per request beyond the messages (tool schemas, framing), as last seen."""
        fit = self._fits.get(model)
        return fit.overhead if fit else 0

    def estimate(self, model: str, messages: Sequence[ChatMessage]) -> int:
        """Calibrated prompt tokens for a whole request: scaled messages plus the fixed overhead."""
        fit = self._fits.get(model)
        rough = estimate_messages_tokens_rough(messages)
        if fit is None:
            return rough
        return round(rough * fit.ratio) + fit.overhead


def _clamp(ratio: float) -> float:
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


def _ema(old: float, sample: float) -> float:
    return old * (1 - EMA_WEIGHT) + sample * EMA_WEIGHT
