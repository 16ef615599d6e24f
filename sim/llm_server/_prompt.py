"""Reading prompts for the fake model server: token counts, the echo's text, cache emulation.

Pure functions and plain state, no I/O. The tokenizer is ceil(chars / 4), so tests can assert exact numbers. A prompt is a list of
`PromptBlock`s; `prefix_digests` names each prefix. Anthropic caches explicitly, up to the last
`cache_control` breakpoint and with a TTL (`TtlCache`, `plan_anthropic_cache`); OpenAI caches
the longest prefix it has seen before, automatically (`PrefixCache`, Chat and Responses alike).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "TTL_SECONDS",
    "CacheOutcome",
    "PrefixCache",
    "PromptBlock",
    "TtlCache",
    "canonical_json",
    "last_user_text",
    "plan_anthropic_cache",
    "prefix_digests",
    "tokens_of_text",
]

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def tokens_of_text(text: str) -> int:
    """The fake's tokenizer: ceil(chars / 4)."""
    return (len(text) + 3) // 4


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def last_user_text(messages: Sequence[dict[str, Any]]) -> str:
    """The newest user message's text, for the echo (Messages and Chat Completions shapes)."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or () if b.get("type") == "text"]
        if texts:
            return "".join(texts)
    return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptBlock:
    """One cacheable unit of a prompt: its identity, its token count and its breakpoint TTL."""

    identity: str
    tokens: int
    ttl: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheOutcome:
    """How a request's prompt splits into read, written and uncached tokens."""

    input_tokens: int
    read_tokens: int = 0
    write_tokens_by_ttl: dict[str, int] = field(default_factory=dict)
    store: tuple[tuple[int, str], ...] = ()
    """(block index, ttl) of every prefix to (re)write with a fresh expiry."""
    hit_index: int | None = None


def prefix_digests(blocks: Sequence[PromptBlock], salt: str) -> list[str]:
    """digests[i] identifies blocks[: i + 1] under `salt` (the cache's scope: model, key...)."""
    digests: list[str] = []
    current = hashlib.sha256(salt.encode()).hexdigest()
    for block in blocks:
        current = hashlib.sha256((current + block.identity).encode()).hexdigest()
        digests.append(current)
    return digests


def plan_anthropic_cache(
    blocks: Sequence[PromptBlock], is_live: Callable[[int], bool], *, min_cache_tokens: int
) -> CacheOutcome:
    """Read the longest live prefix up to the last breakpoint, write the rest up to it."""
    cumulative = list(itertools.accumulate(b.tokens for b in blocks))
    total = cumulative[-1] if cumulative else 0
    breakpoints = [
        i
        for i, b in enumerate(blocks)
        if b.ttl is not None and cumulative[i] >= max(min_cache_tokens, 1)
    ]
    if not breakpoints:
        return CacheOutcome(input_tokens=total)
    last = breakpoints[-1]
    hit = next((i for i in range(last, -1, -1) if is_live(i)), None)
    read = cumulative[hit] if hit is not None else 0
    written: dict[str, int] = {}
    start = read
    for index in breakpoints:
        if hit is not None and index <= hit:
            continue
        ttl = blocks[index].ttl or "5m"
        written[ttl] = written.get(ttl, 0) + cumulative[index] - start
        start = cumulative[index]
    store = tuple((i, blocks[i].ttl or "5m") for i in breakpoints)
    return CacheOutcome(
        input_tokens=total - cumulative[last],
        read_tokens=read,
        write_tokens_by_ttl=written,
        store=store,
        hit_index=hit,
    )


@dataclass(slots=True)
class _Entry:
    ttl: str
    expires_at: float


@dataclass(slots=True)
class TtlCache:
    """Anthropic's explicit cache: prefixes written at breakpoints, live until their TTL runs out."""

    _entries: dict[str, _Entry] = field(default_factory=dict)

    def account(
        self, blocks: Sequence[PromptBlock], *, salt: str, now: float, min_cache_tokens: int
    ) -> CacheOutcome:
        """Plan the request, refresh the prefix it read, (re)write every breakpoint's prefix."""
        digests = prefix_digests(blocks, salt)

        def is_live(index: int) -> bool:
            entry = self._entries.get(digests[index])
            return entry is not None and entry.expires_at > now

        plan = plan_anthropic_cache(blocks, is_live, min_cache_tokens=min_cache_tokens)
        if plan.hit_index is not None:
            hit = self._entries[digests[plan.hit_index]]
            hit.expires_at = now + TTL_SECONDS[hit.ttl]
        for index, ttl in plan.store:
            self._entries[digests[index]] = _Entry(ttl, now + TTL_SECONDS[ttl])
        return plan


@dataclass(slots=True)
class PrefixCache:
    """OpenAI's automatic cache: the longest prefix seen before is read; every prefix is kept."""

    _seen: set[str] = field(default_factory=set)

    def cached_tokens(self, blocks: Sequence[PromptBlock], *, salt: str) -> int:
        digests = prefix_digests(blocks, salt)
        cached, running = 0, 0
        for block, digest in zip(blocks, digests, strict=True):
            running += block.tokens
            if digest in self._seen:
                cached = running
        self._seen.update(digests)
        return cached
