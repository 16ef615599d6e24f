"""A model's context window: config, else a table of well-known models, else the endpoint, else 128K."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "DEFAULT_CONTEXT_LENGTH",
    "KNOWN_CONTEXT_LENGTHS",
    "PROBE_TIMEOUT_S",
    "context_length_for",
    "context_length_from_models",
    "context_length_from_props",
    "probe_context_length",
    "resolve_context_length",
]

DEFAULT_CONTEXT_LENGTH = 128_000
"""Used, with a warning, when nothing else says how large the window is."""
PROBE_TIMEOUT_S = 3.0
CLAUDE_1M_CONTEXT_LENGTH = 1_000_000

KNOWN_CONTEXT_LENGTHS: Mapping[str, int] = {
    "claude": 200_000,
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "gemini": 1_048_576,
    "llama3": 8_192,
    "llama-3": 8_192,
    "llama3.1": 131_072,
    "llama-3.1": 131_072,
    "llama3.2": 131_072,
    "llama-3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.3": 131_072,
    "qwen": 32_768,
    "mistral": 32_768,
    "mixtral": 32_768,
    "gemma2": 8_192,
    "gemma-2": 8_192,
    "gemma3": 131_072,
    "gemma-3": 131_072,
    "deepseek": 128_000,
}
"""Keys match at the start of the name or after `/ : - _ .`; the longest matching key wins."""

_MODEL_FIELDS = ("context_length", "max_model_len", "context_window", "max_context_length")
_CLAUDE_1M = re.compile(r"claude.*sonnet-4.*(?:^|[-_\[:.])1m\b")

log = structlog.get_logger(__name__)


def context_length_for(model: str, configured: int | None) -> int | None:
    """The configured window, else the table's entry for `model`, else None."""
    if configured:
        return configured
    name = model.lower()
    if _CLAUDE_1M.search(name):
        return CLAUDE_1M_CONTEXT_LENGTH
    best: tuple[int, int] | None = None
    for key, tokens in KNOWN_CONTEXT_LENGTHS.items():
        if re.search(r"(?:^|[/:_\-.\s])" + re.escape(key), name):
            if best is None or len(key) > best[0]:
                best = (len(key), tokens)
    return best[1] if best else None


def context_length_from_models(payload: Any, model: str) -> int | None:
    """The window from an OpenAI-style `GET /models` body (vLLM, OpenRouter, llama.cpp, ...)."""
    entries = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        return None
    dicts = [e for e in entries if isinstance(e, dict)]
    chosen = next((e for e in dicts if e.get("id") == model), None)
    if chosen is None and len(dicts) == 1:
        chosen = dicts[0]
    if chosen is None:
        return None
    for field in _MODEL_FIELDS:
        if (value := _positive_int(chosen.get(field))) is not None:
            return value
    top = chosen.get("top_provider")
    if isinstance(top, dict) and (value := _positive_int(top.get("context_length"))):
        return value
    meta = chosen.get("meta")
    return _positive_int(meta.get("n_ctx_train")) if isinstance(meta, dict) else None


def context_length_from_props(payload: Any) -> int | None:
    """The window llama.cpp's `GET /props` reports for the running server."""
    if not isinstance(payload, dict):
        return None
    settings = payload.get("default_generation_settings")
    if isinstance(settings, dict) and (value := _positive_int(settings.get("n_ctx"))):
        return value
    return _positive_int(payload.get("n_ctx"))


async def probe_context_length(
    base_url: str, api_key: str | None, model: str, timeout_s: float = PROBE_TIMEOUT_S
) -> int | None:
    """Ask an OpenAI-compatible endpoint: explicit `/models` fields, llama.cpp `/props`,
    then the training context llama.cpp lists in `/models`. None when nothing answers."""
    base = base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    import aiohttp  # only when a probe is needed: it costs start-up time

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:
        models = await _get_json(session, f"{base}/models", timeout_s)
        found = context_length_from_models(_without_train_ctx(models), model)
        if found is None:
            found = context_length_from_props(await _get_json(session, f"{root}/props", timeout_s))
        if found is None:
            found = context_length_from_models(models, model)
    log.debug("context_length_probed", model=model, context_length=found)
    return found


async def resolve_context_length(
    model: str,
    configured: int | None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> int:
    """Configured, else the table, else the endpoint's answer, else 128,000 with a warning."""
    known = context_length_for(model, configured)
    if known is not None:
        return known
    if base_url:
        probed = await probe_context_length(base_url, api_key, model, timeout_s)
        if probed is not None:
            return probed
    log.warning(
        "context_length_defaulted",
        model=model,
        context_length=DEFAULT_CONTEXT_LENGTH,
        hint="set model.context_length in config.yaml",
    )
    return DEFAULT_CONTEXT_LENGTH


async def _get_json(session: aiohttp.ClientSession, url: str, timeout_s: float) -> Any:
    """GET `url` as JSON; None on any HTTP, network, timeout or decoding failure."""
    import aiohttp

    try:
        async with asyncio.timeout(timeout_s), session.get(url) as response:
            if response.status != 200:
                return None
            return await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        log.debug("context_length_probe_failed", url=url, error=type(exc).__name__)
        return None


def _without_train_ctx(payload: Any) -> Any:
    """The `/models` body minus llama.cpp's `meta` (its training context is only a last resort)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return payload
    data = [
        {k: v for k, v in e.items() if k != "meta"} if isinstance(e, dict) else e
        for e in payload["data"]
    ]
    return {**payload, "data": data}


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None
