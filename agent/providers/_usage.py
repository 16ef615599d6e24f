"""OpenAI-style usage -> `Usage`: the one place cached tokens are split out of the prompt count.

OpenAI counts cached (and cache-written) tokens inside the prompt total; Anthropic reports them
apart. Chat Completions, Responses and the codex app-server all follow OpenAI and differ only in
where they keep the numbers, so each names its `UsageShape` and this module does the arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.providers.base import Usage

__all__ = ["UsageShape", "usage_from_openai_style"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageShape:
    """Where one wire format keeps its token counts (all keys of a JSON object)."""

    prompt: str
    """The prompt total, cached and cache-written tokens included."""
    output: str
    details: str | None
    """The nested object holding the two cache counts; None when they sit next to `prompt`."""
    cached: str = "cached_tokens"
    written: str = "cache_write_tokens"


def usage_from_openai_style(raw: Mapping[str, Any], shape: UsageShape) -> Usage:
    """The usage with cache reads and writes carved out of the prompt total (never below 0)."""
    details = (raw.get(shape.details) or {}) if shape.details is not None else raw
    cached = _count(details, shape.cached)
    written = _count(details, shape.written)
    return Usage(
        input_tokens=max(_count(raw, shape.prompt) - cached - written, 0),
        output_tokens=_count(raw, shape.output),
        cache_write_tokens=written,
        cache_read_tokens=cached,
    )


def _count(values: Mapping[str, Any], key: str) -> int:
    return int(values.get(key) or 0)
