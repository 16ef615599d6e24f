"""The gate for native Responses compaction (gpt-5.6 on api.openai.com or the Codex backend).

Pure functions: the provider asks `native_compaction_field` on every request, so a switch of
model or route stops the field at once; `endpoint_of` names the issuer that replayed items are
tagged with, so checkpoints from another endpoint are never sent back (cross-issuer guard).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "CODEX_BASE_URL",
    "CODEX_PROVIDER",
    "MIN_COMPACT_THRESHOLD",
    "NATIVE_MARGIN_TOKENS",
    "OPENAI_BASE_URL",
    "compact_threshold_tokens",
    "endpoint_of",
    "is_native_model",
    "is_native_rejection",
    "is_native_route",
    "native_compaction_field",
    "resolved_base_url",
]

OPENAI_BASE_URL = "https://api.openai.com/v1"
CODEX_BASE_URL = "https://chatgpt.com/backend-api/codex"
"""The ChatGPT Codex backend (subscription OAuth); the SDK appends `/responses`."""
CODEX_PROVIDER = "openai-codex"
NATIVE_MARGIN_TOKENS = 8_192
"""The server threshold sits this far below the local trigger, so the server compacts first."""
MIN_COMPACT_THRESHOLD = 16_384
"""Never ask the server to compact below this many input tokens."""

_NATIVE_MODEL = re.compile(r"(?:openai/)?gpt-5\.6(?:-[\w.-]+)?", re.IGNORECASE)
_OPENAI_HOST = "api.openai.com"
_CODEX_HOST = "chatgpt.com"
_CODEX_PATH = "/backend-api/codex"
_REJECTION_WORDS = ("context_management", "compaction", "compact_threshold")


def is_native_model(model: str) -> bool:
    """The gpt-5.6 family only; other models fail server-side without a structured error."""
    return _NATIVE_MODEL.fullmatch(model.strip()) is not None


def resolved_base_url(*, provider: str, base_url: str | None) -> str | None:
    """The URL the SDK will call: the configured one, else the provider's default."""
    if base_url:
        return base_url
    if provider == "openai":
        return OPENAI_BASE_URL
    if provider == CODEX_PROVIDER:
        return CODEX_BASE_URL
    return None


def is_native_route(*, provider: str, base_url: str | None) -> bool:
    """api.openai.com or the ChatGPT Codex backend; relays, xAI, OpenRouter, local: never."""
    url = resolved_base_url(provider=provider, base_url=base_url)
    if url is None:
        return False
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "https":
        return False
    if host == _OPENAI_HOST:
        return True
    return host == _CODEX_HOST and parts.path.rstrip("/").startswith(_CODEX_PATH)


def compact_threshold_tokens(*, configured_threshold: int, local_trigger_tokens: int) -> int:
    """min(configured, local trigger - 8K), never below `MIN_COMPACT_THRESHOLD`."""
    clamped = min(configured_threshold, local_trigger_tokens - NATIVE_MARGIN_TOKENS)
    return max(clamped, MIN_COMPACT_THRESHOLD)


def native_compaction_field(
    *,
    enabled: bool,
    model: str,
    base_url: str | None,
    provider: str,
    local_trigger_tokens: int,
    configured_threshold: int,
    disabled_for_session: bool,
) -> dict[str, Any] | None:
    """The `context_management` entry for this request, or None when the gate says no."""
    if not enabled or disabled_for_session:
        return None
    if not is_native_model(model) or not is_native_route(provider=provider, base_url=base_url):
        return None
    threshold = compact_threshold_tokens(
        configured_threshold=configured_threshold, local_trigger_tokens=local_trigger_tokens
    )
    return {"type": "compaction", "compact_threshold": threshold}


def is_native_rejection(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> bool:
    """A structured 400 that names the field: native compaction is off for the session then."""
    if status != 400:
        return False
    text = " ".join(part for part in (param, code, message) if part).lower()
    return any(word in text for word in _REJECTION_WORDS)


def endpoint_of(*, provider: str, base_url: str | None) -> str:
    """The issuer tag for replayed items: the base URL's host (with any explicit port)."""
    url = resolved_base_url(provider=provider, base_url=base_url) or ""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    return f"{host}:{parts.port}" if parts.port else host
