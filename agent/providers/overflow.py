"""What a provider's "prompt too long" error says about the window: pure parsing of real wordings.

Most servers name the window, and many the prompt size as they counted it, in their overflow
error. Both are worth more than any table: the window is the truth for this deployment (a local
server started with a small context), and the prompt count calibrates our estimate of it.

| server | wording (as the server sends it) |
|---|---|
| Anthropic | `prompt is too long: 215000 tokens > 200000 maximum` |
| OpenAI | `This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.` |
| llama-cpp-python, vLLM | `... maximum context length is 8192 tokens. However, you requested 15109 tokens (11013 in the messages, 4096 in the completion).` |
| vLLM (newer) | `... maximum context length is 4096 tokens. However, your request has 5000 input tokens.` |
| llama.cpp llama-server | `request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it` |
| LM Studio | `Trying to keep the first 4466 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, ...` |
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Overflow", "parse_overflow"]

_WINDOW = (
    re.compile(r"tokens\s*>\s*([\d,]+)\s*maximum", re.I),
    re.compile(r"maximum context length is\s*([\d,]+)", re.I),
    re.compile(r"available context size\s*\(\s*([\d,]+)\s*tokens", re.I),
    re.compile(r"context length of only\s*([\d,]+)", re.I),
    re.compile(r"context (?:length|window|size) (?:of|is)\s*([\d,]+)\s*tokens", re.I),
)
_PROMPT = (
    re.compile(r"prompt is too long:\s*([\d,]+)\s*tokens", re.I),
    re.compile(r"\(([\d,]+) in the messages", re.I),
    re.compile(r"messages resulted in\s*([\d,]+)\s*tokens", re.I),
    re.compile(r"request has\s*([\d,]+)\s*input tokens", re.I),
    re.compile(r"request \(\s*([\d,]+)\s*tokens\)", re.I),
    re.compile(r"keep the first\s*([\d,]+)\s*tokens", re.I),
)
_COMPLETION = re.compile(r"([\d,]+) in the completion", re.I)


@dataclass(frozen=True, slots=True, kw_only=True)
class Overflow:
    """The numbers an overflow error gave; None for each it did not."""

    window_tokens: int | None = None
    """The model's window as the server enforces it."""
    prompt_tokens: int | None = None
    """The prompt as the server counted it."""
    completion_tokens: int | None = None
    """The output budget the server counted against the window (`max_tokens`)."""


def parse_overflow(message: str) -> Overflow:
    """The window, prompt and completion sizes an overflow message names (any it does)."""
    return Overflow(
        window_tokens=_first(_WINDOW, message),
        prompt_tokens=_first(_PROMPT, message),
        completion_tokens=_first((_COMPLETION,), message),
    )


def _first(patterns: tuple[re.Pattern[str], ...], message: str) -> int | None:
    for pattern in patterns:
        if (match := pattern.search(message)) is not None:
            value = int(match.group(1).replace(",", ""))
            return value if value > 0 else None
    return None
