"""Config -> `ProviderSettings` -> a built `Provider`; the SDK module is imported only here, lazily."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from agent.errors import ConfigError, MissingApiKey, ProviderAuthError
from agent.providers.base import Provider, ProviderSettings

if TYPE_CHECKING:
    from agent.config import AuxiliaryModelConfig, CompressionConfig, ModelConfig

__all__ = [
    "API_KEY_ENV",
    "CACHE_CONTROL_PROVIDERS",
    "build_provider",
    "codex_access_token",
    "resolve_aux_settings",
    "resolve_settings",
]

API_KEY_ENV: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
"""The environment variable holding each provider's key; `custom` takes its key from config only,
and `openai-codex` its ChatGPT sign-in from the Codex CLI's auth.json."""
CACHE_CONTROL_PROVIDERS = frozenset({"anthropic", "openrouter"})
"""Routes that accept `cache_control` markers on content blocks."""
_CHAT_COMPLETIONS = frozenset({"openai", "openrouter", "custom"})


def resolve_settings(
    model_cfg: ModelConfig, environ: Mapping[str, str], *, model_override: str | None = None
) -> ProviderSettings:
    """Settings for the main model: key from config, else the provider's environment variable."""
    provider = model_cfg.provider
    model = model_override or model_cfg.default
    base_url = _clean(model_cfg.base_url)
    if provider == "custom" and base_url is None:
        raise ConfigError(
            "model.provider is 'custom' but model.base_url is not set: set it to the server's "
            "OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1, or name the server "
            "(model.provider: ollama, vllm, llamacpp or lmstudio) to use its default address",
            key="model.base_url",
        )
    api_key = _clean(model_cfg.api_key) or _env_key(provider, environ)
    _require_key(provider, model, api_key, config_key="model.api_key")
    return ProviderSettings(
        provider=provider,
        model=model,
        base_url=base_url,
        api_key=api_key,
        timeout_s=model_cfg.timeout_s,
        stream_deadline_s=model_cfg.stream_deadline_s,
        silence_timeout_s=model_cfg.silence_timeout_s,
        max_retries=model_cfg.max_retries,
        api_mode=model_cfg.api_mode,
    )


def resolve_aux_settings(
    aux_cfg: AuxiliaryModelConfig, main: ProviderSettings, environ: Mapping[str, str]
) -> ProviderSettings:
    """Settings for an auxiliary model (e.g. the compression summarizer).

    Provider `auto`/`main` means the main settings; a named provider uses its own key and
    endpoint, falling back to the main ones when it is the main provider. No model means the
    main model.
    """
    model = aux_cfg.model or main.model
    same_route = aux_cfg.provider in ("auto", "main", main.provider)
    provider = main.provider if aux_cfg.provider in ("auto", "main") else aux_cfg.provider
    base_url = _clean(aux_cfg.base_url) or (main.base_url if same_route else None)
    api_key = _clean(aux_cfg.api_key) or (main.api_key if same_route else None)
    api_key = api_key or _env_key(provider, environ)
    if provider == "custom" and base_url is None:
        raise ConfigError(
            "auxiliary.compression.provider is 'custom' but no base_url is set: set "
            "auxiliary.compression.base_url",
            key="auxiliary.compression.base_url",
        )
    _require_key(provider, model, api_key, config_key="auxiliary.compression.api_key")
    return ProviderSettings(
        provider=provider,
        model=model,
        base_url=base_url,
        api_key=api_key,
        timeout_s=aux_cfg.timeout_s,
        max_retries=main.max_retries,
        api_mode=main.api_mode if same_route else "chat_completions",
    )


def build_provider(
    settings: ProviderSettings,
    *,
    compression: CompressionConfig | None = None,
    local_trigger_tokens: Callable[[], int] | None = None,
) -> Provider:
    """Build the provider for `settings`, importing its SDK adapter module only now.

    `compression` and `local_trigger_tokens` feed the Responses route's native compaction gate
    (the local compressor's trigger, read on every request).
    """
    if settings.api_mode == "codex_app_server":
        from agent.codex.app_server import CodexAppServerProvider

        return CodexAppServerProvider(settings)
    if settings.api_mode == "responses" or settings.provider == "openai-codex":
        if settings.provider not in ("openai", "openai-codex"):
            raise ConfigError(
                f"model.api_mode 'responses' needs provider openai or openai-codex, "
                f"not {settings.provider!r}",
                key="model.api_mode",
            )
        from agent.providers.openai_responses import OpenAIResponsesProvider

        native = compression.codex_responses_native if compression else False
        threshold = compression.codex_responses_compact_threshold if compression else 200_000
        return OpenAIResponsesProvider(
            settings,
            native_compaction=native,
            compact_threshold=threshold,
            local_trigger_tokens=local_trigger_tokens,
        )
    if settings.provider == "anthropic":
        from agent.providers.anthropic import AnthropicProvider

        return AnthropicProvider(settings)
    if settings.provider in _CHAT_COMPLETIONS:
        if settings.api_mode != "chat_completions":
            raise ConfigError(
                f"model.api_mode {settings.api_mode!r} is not available for provider "
                f"{settings.provider!r}; use 'chat_completions'",
                key="model.api_mode",
            )
        from agent.providers.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(
            settings, accepts_cache_control=settings.provider in CACHE_CONTROL_PROVIDERS
        )
    raise ConfigError(
        f"model.provider {settings.provider!r} has no adapter in this build; "
        "use anthropic, openai, openrouter, custom or openai-codex",
        key="model.provider",
    )


def _env_key(provider: str, environ: Mapping[str, str]) -> str | None:
    if provider == "openai-codex":
        return codex_access_token(environ)
    variable = API_KEY_ENV.get(provider)
    return _clean(environ.get(variable)) if variable else None


def codex_access_token(environ: Mapping[str, str]) -> str | None:
    """The OAuth access token `codex login` saved in $CODEX_HOME/auth.json (default ~/.codex)."""
    home = environ.get("CODEX_HOME") or str(
        Path(environ.get("HOME") or "~").expanduser() / ".codex"
    )
    try:
        data = json.loads((Path(home) / "auth.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    tokens = data.get("tokens") if isinstance(data, dict) else None
    token = tokens.get("access_token") if isinstance(tokens, dict) else None
    return _clean(token) if isinstance(token, str) else None


def _require_key(provider: str, model: str, api_key: str | None, *, config_key: str) -> None:
    """Every provider but `custom` needs a key; say exactly what to set."""
    if api_key or provider == "custom":
        return
    if provider == "openai-codex":
        raise ProviderAuthError(
            provider,
            model,
            f"no ChatGPT sign-in found; run `codex login` (it writes ~/.codex/auth.json) or set "
            f"{config_key} to the OAuth access token",
        )
    variable = API_KEY_ENV.get(provider, "the provider's API key variable")
    raise MissingApiKey(
        provider,
        model,
        f"no API key for {provider}: set {variable} (or {config_key} in config.yaml), or run "
        "`hermes setup`; for a model on this machine set model.provider to ollama, vllm, "
        "llamacpp or lmstudio",
    )


def _clean(value: str | None) -> str | None:
    value = value.strip() if value else None
    return value or None
