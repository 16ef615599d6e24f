"""Settings resolution from config and environment, and lazy provider construction."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import AuxiliaryModelConfig, ModelConfig
from agent.errors import ConfigError, ProviderAuthError
from agent.providers.base import Provider, ProviderSettings
from agent.providers.registry import build_provider, resolve_aux_settings, resolve_settings


@pytest.mark.parametrize(
    ("cfg", "environ", "expected_key", "expected_base"),
    [
        ({"provider": "anthropic"}, {"ANTHROPIC_API_KEY": "env-a"}, "env-a", None),
        (
            {"provider": "anthropic", "api_key": "cfg-a"},
            {"ANTHROPIC_API_KEY": "env-a"},
            "cfg-a",
            None,
        ),
        ({"provider": "openai"}, {"OPENAI_API_KEY": " env-o "}, "env-o", None),
        ({"provider": "openrouter"}, {"OPENROUTER_API_KEY": "env-r"}, "env-r", None),
        (
            {"provider": "custom", "base_url": "http://127.0.0.1:11434/v1"},
            {"OPENAI_API_KEY": "x"},
            None,
            "http://127.0.0.1:11434/v1",
        ),
        ({"provider": "custom", "base_url": "http://h/v1", "api_key": "k"}, {}, "k", "http://h/v1"),
    ],
)
def test_resolve_settings(
    cfg: dict[str, str],
    environ: dict[str, str],
    expected_key: str | None,
    expected_base: str | None,
) -> None:
    """The key comes from config, else the provider's variable; custom never borrows OpenAI's key."""
    settings = resolve_settings(ModelConfig.model_validate(cfg), environ)
    assert settings.api_key == expected_key
    assert settings.base_url == expected_base
    assert settings.provider == cfg["provider"]


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("openai", "OPENAI_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
    ],
)
def test_missing_key_names_what_to_set(provider: str, variable: str) -> None:
    """No key anywhere: one clear ProviderAuthError naming the variable and the config key."""
    with pytest.raises(ProviderAuthError) as caught:
        resolve_settings(ModelConfig(provider=provider), {variable: "  "})  # type: ignore[arg-type]
    assert variable in str(caught.value) and "model.api_key" in str(caught.value)


def test_custom_needs_base_url() -> None:
    """The custom provider without a base_url is a ConfigError naming model.base_url."""
    with pytest.raises(ConfigError) as caught:
        resolve_settings(ModelConfig(provider="custom"), {})
    assert caught.value.key == "model.base_url"


def test_model_override_and_limits_are_carried() -> None:
    """--model overrides model.default; timeouts and retries come from config."""
    cfg = ModelConfig(
        provider="openai", default="gpt-4o", timeout_s=9.0, stream_deadline_s=30.0, max_retries=1
    )
    settings = resolve_settings(cfg, {"OPENAI_API_KEY": "k"}, model_override="gpt-5-mini")
    assert (settings.model, settings.timeout_s, settings.max_retries) == ("gpt-5-mini", 9.0, 1)
    assert settings.stream_deadline_s == 30.0


MAIN = ProviderSettings(
    provider="anthropic",
    model="claude-main",
    api_key="main-key",
    base_url="http://main",
    timeout_s=50.0,
)


@pytest.mark.parametrize(
    ("aux", "environ", "expected"),
    [
        ({}, {}, ("anthropic", "claude-main", "main-key", "http://main")),
        (
            {"provider": "main", "model": "claude-haiku"},
            {},
            ("anthropic", "claude-haiku", "main-key", "http://main"),
        ),
        (
            {"provider": "openrouter", "model": "x/y"},
            {"OPENROUTER_API_KEY": "r"},
            ("openrouter", "x/y", "r", None),
        ),
        (
            {"provider": "anthropic", "api_key": "aux-key"},
            {},
            ("anthropic", "claude-main", "aux-key", "http://main"),
        ),
    ],
)
def test_resolve_aux_settings(
    aux: dict[str, str], environ: dict[str, str], expected: tuple[object, ...]
) -> None:
    """auto/main reuse the main route; a named provider uses its own key; no model means the main one."""
    settings = resolve_aux_settings(AuxiliaryModelConfig(**aux), MAIN, environ)  # type: ignore[arg-type]
    assert (settings.provider, settings.model, settings.api_key, settings.base_url) == expected
    assert settings.timeout_s == 120.0


def test_aux_missing_key_is_an_auth_error() -> None:
    """A named auxiliary provider with no key says which key to set."""
    with pytest.raises(ProviderAuthError, match="auxiliary.compression.api_key"):
        resolve_aux_settings(AuxiliaryModelConfig(provider="openai"), MAIN, {})


@pytest.mark.parametrize(
    ("provider", "cls_name", "accepts"),
    [
        ("anthropic", "AnthropicProvider", None),
        ("openai", "OpenAIChatProvider", False),
        ("openrouter", "OpenAIChatProvider", True),
        ("custom", "OpenAIChatProvider", False),
    ],
)
async def test_build_provider(provider: str, cls_name: str, accepts: bool | None) -> None:
    """Each provider name builds its adapter; only OpenRouter of the chat routes keeps cache markers."""
    built = build_provider(
        ProviderSettings(
            provider=provider, model="m", api_key="k", base_url="http://127.0.0.1:9/v1"
        )
    )
    assert isinstance(built, Provider)
    assert type(built).__name__ == cls_name
    assert built.name == provider
    if accepts is not None:
        assert built._accepts_cache_control is accepts  # type: ignore[attr-defined]
    await built.aclose()


def test_build_provider_rejects_unsupported_modes() -> None:
    """An API mode the route cannot serve is a ConfigError naming the key."""
    with pytest.raises(ConfigError) as caught:
        build_provider(
            ProviderSettings(provider="anthropic", model="m", api_key="k", api_mode="responses")
        )
    assert caught.value.key == "model.api_mode"
    with pytest.raises(ConfigError) as caught:
        build_provider(
            ProviderSettings(
                provider="custom",
                model="m",
                api_key="k",
                api_mode="responses",
                base_url="http://127.0.0.1:1/v1",
            )
        )
    assert caught.value.key == "model.api_mode"


@pytest.mark.parametrize(
    ("provider", "api_mode", "cls"),
    [
        ("openai", "responses", "OpenAIResponsesProvider"),
        ("openai-codex", "chat_completions", "OpenAIResponsesProvider"),
        ("openai-codex", "responses", "OpenAIResponsesProvider"),
        ("openai", "codex_app_server", "CodexAppServerProvider"),
    ],
)
async def test_build_provider_routes_openai_modes(provider: str, api_mode: str, cls: str) -> None:
    """The Responses API serves api_mode responses and the Codex route; app-server has its own."""
    built = build_provider(
        ProviderSettings(provider=provider, model="gpt-5.6", api_key="k", api_mode=api_mode)
    )
    try:
        assert type(built).__name__ == cls
    finally:
        await built.aclose()


def test_codex_route_signs_in_from_the_codex_cli(tmp_path: Path) -> None:
    """openai-codex takes the OAuth access token `codex login` saved, not OPENAI_API_KEY."""
    import json

    from agent.config import ModelConfig

    (tmp_path / "auth.json").write_text(json.dumps({"tokens": {"access_token": "oauth-tok"}}))
    cfg = ModelConfig(provider="openai-codex", default="gpt-5.5")
    env = {"CODEX_HOME": str(tmp_path), "OPENAI_API_KEY": "sk-not-this-one"}
    assert resolve_settings(cfg, env).api_key == "oauth-tok"
    with pytest.raises(ProviderAuthError, match="codex login"):
        resolve_settings(cfg, {"CODEX_HOME": str(tmp_path / "missing")})
