"""A model's context window, and where it came from.

Order: `model.context_length`; a window an overflow error taught us (`window_memory`); then, for
a local or custom server, what the server itself reports (its configured context beats a
table entry for the model's name: a 32K model served with `-c 8192` has an 8K window), the
table of well-known models, the endpoint for hosted routes; else 128K, with a warning.

Probes: OpenAI-style `/v1/models` fields (vLLM `max_model_len`, OpenRouter `context_length`),
llama.cpp `/props` (`n_ctx`), Ollama `/api/ps` (the loaded model's `context_length`) and
`/api/show` (`num_ctx` among its parameters), LM Studio `/api/v0/models/{model}`
(`loaded_context_length`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import structlog

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "DEFAULT_CONTEXT_LENGTH",
    "ResolvedWindow",
    "WindowSource",
    "KNOWN_CONTEXT_LENGTHS",
    "PROBE_TIMEOUT_S",
    "context_length_for",
    "context_length_from_models",
    "context_length_from_props",
    "context_length_from_lmstudio",
    "context_length_from_ollama_ps",
    "context_length_from_ollama_show",
    "probe_context_length",
    "resolve_context_length",
    "resolve_window",
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

WindowSource: TypeAlias = Literal["config", "learned", "endpoint", "table", "default"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedWindow:
    """The window in tokens, and what said so (for the notice and `hermes doctor`)."""

    tokens: int
    source: WindowSource


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
    """Ask an OpenAI-compatible endpoint what window it runs `model` with; None when nothing
    answers. Explicit `/models` fields first, then the servers' own endpoints (llama.cpp,
    Ollama, LM Studio), then the training context llama.cpp lists in `/models`."""
    base = base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    import aiohttp  # only when a probe is needed: it costs start-up time

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:
        models, props, ps, shown, lmstudio = await asyncio.gather(  # at once: one timeout
            _get_json(session, f"{base}/models", timeout_s),
            _get_json(session, f"{root}/props", timeout_s),
            _get_json(session, f"{root}/api/ps", timeout_s),
            _post_json(session, f"{root}/api/show", {"model": model}, timeout_s),
            _get_json(session, f"{root}/api/v0/models/{model}", timeout_s),
        )
    found = next(
        (
            value
            for value in (
                context_length_from_models(_without_train_ctx(models), model),
                context_length_from_props(props),
                context_length_from_ollama_ps(ps, model),
                context_length_from_ollama_show(shown),
                context_length_from_lmstudio(lmstudio),
                context_length_from_models(models, model),
            )
            if value is not None
        ),
        None,
    )
    log.debug("context_length_probed", model=model, context_length=found)
    return found


def context_length_from_ollama_ps(payload: Any, model: str) -> int | None:
    """Ollama's `GET /api/ps`: the loaded model's `context_length` (its effective num_ctx)."""
    entries = payload.get("models") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and model in (entry.get("name"), entry.get("model")):
            return _positive_int(entry.get("context_length"))
    return None


def context_length_from_ollama_show(payload: Any) -> int | None:
    """Ollama's `POST /api/show`: `num_ctx` when the model's parameters set it."""
    if not isinstance(payload, dict) or not isinstance(payload.get("parameters"), str):
        return None
    found = re.search(r"^\s*num_ctx\s+(\d+)", payload["parameters"], re.M)
    return int(found.group(1)) if found else None


def context_length_from_lmstudio(payload: Any) -> int | None:
    """LM Studio's `GET /api/v0/models/{model}`: the context the model is loaded with."""
    if not isinstance(payload, dict):
        return None
    return _positive_int(payload.get("loaded_context_length"))


async def resolve_window(
    model: str,
    configured: int | None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    learned: int | None = None,
    local: bool = False,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> ResolvedWindow:
    """The window and its source, in the order the module docstring gives. `local`: a custom
    endpoint, whose own report beats the table."""
    if configured:
        return ResolvedWindow(tokens=configured, source="config")
    if learned:
        return ResolvedWindow(tokens=learned, source="learned")
    probed: int | None = None
    if base_url and local:
        probed = await probe_context_length(base_url, api_key, model, timeout_s)
        if probed is not None:
            return ResolvedWindow(tokens=probed, source="endpoint")
    known = context_length_for(model, None)
    if known is not None:
        return ResolvedWindow(tokens=known, source="table")
    if base_url and not local:
        probed = await probe_context_length(base_url, api_key, model, timeout_s)
        if probed is not None:
            return ResolvedWindow(tokens=probed, source="endpoint")
    log.warning(
        "context_length_defaulted",
        model=model,
        context_length=DEFAULT_CONTEXT_LENGTH,
        hint="set model.context_length in config.yaml",
    )
    return ResolvedWindow(tokens=DEFAULT_CONTEXT_LENGTH, source="default")


async def resolve_context_length(
    model: str,
    configured: int | None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> int:
    """Configured, else the table, else the endpoint's answer, else 128,000 with a warning."""
    window = await resolve_window(
        model, configured, base_url=base_url, api_key=api_key, timeout_s=timeout_s
    )
    return window.tokens


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


async def _post_json(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout_s: float
) -> Any:
    """POST `body` to `url`, the answer as JSON; None on any failure (as `_get_json`)."""
    import aiohttp

    try:
        async with asyncio.timeout(timeout_s), session.post(url, json=body) as response:
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
