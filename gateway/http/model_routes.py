"""Which model answers a request: the configured default, or a name `gateway.http.models` serves
(each with its own provider, built once by the same registry as the runtime's); any other name
is a 400 that lists what is served. `/v1/models` and `/v1/models/{id}` answer from here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agent.config import HermesConfig, HttpModelRoute
from agent.errors import ConfigError
from agent.media.attach import MediaProvider, MediaReader
from agent.providers.base import Provider, ProviderSettings
from agent.providers.call_options import Wire, wire_of
from agent.providers.registry import API_KEY_ENV, build_provider
from agent.turn_options import TurnOptions
from gateway.http.error_envelope import ApiError

__all__ = ["ModelRoutes"]


class ModelRoutes:
    """The served model names and, for routed ones, their providers (closed by `aclose`)."""

    def __init__(
        self, config: HermesConfig, environ: Mapping[str, str], *, media: MediaReader | None = None
    ) -> None:
        """`media`: routed models see images as the default one does (`agent.media.attach`)."""
        self.default = config.model.default
        self._default_wire = wire_of(config.model.provider, config.model.api_mode)
        self._routes = dict(config.gateway.http.models)
        self._providers: dict[str, Provider] = {}
        try:
            for name, route in self._routes.items():
                if name != self.default:
                    built = build_provider(_settings(name, route, config, environ))
                    if media is not None:
                        built = MediaProvider(built, media, vision=config.model.vision)
                    self._providers[name] = built
        except BaseException:
            self._providers.clear()
            raise

    @property
    def names(self) -> list[str]:
        return [self.default, *(n for n in self._routes if n != self.default)]

    def wire(self, requested: str | None) -> Wire:
        """The wire the request's model is served over (what its pass-through fields must fit);
        an unknown name gets the default's, and `route` refuses it."""
        route = self._routes.get(requested or "")
        if route is None or requested == self.default:
            return self._default_wire
        return wire_of(route.provider, "chat_completions")

    def route(self, options: TurnOptions, requested: str | None) -> TurnOptions:
        """`options` with the provider and model that answer the request's `model`: unchanged
        for the default model; a 400 listing the served names for one not served."""
        if not requested or requested == self.default:
            return options
        provider = self._providers.get(requested)
        if provider is None:
            served = ", ".join(self.names)
            raise ApiError(
                400,
                f"model {requested!r} is not served here; use one of: {served}",
                param="model",
                code="model_not_found",
            )
        return replace(options, provider=provider, model=self._routes[requested].model)

    def card(self, name: str) -> dict[str, Any] | None:
        """`/v1/models/{id}`'s object (OpenAI API reference, "The model object"), or None."""
        if name not in self.names:
            return None
        return {"id": name, "object": "model", "created": 0, "owned_by": "hermes"}

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()


def _settings(
    name: str, route: HttpModelRoute, config: HermesConfig, environ: Mapping[str, str]
) -> ProviderSettings:
    variable = route.api_key_env or API_KEY_ENV.get(route.provider)
    api_key = environ.get(variable) if variable else None
    if not api_key and route.provider != "custom":
        raise ConfigError(
            f"gateway.http.models.{name}: no API key for {route.provider}: set "
            f"{variable or 'api_key_env'}",
            key=f"gateway.http.models.{name}.api_key_env",
        )
    if route.provider == "custom" and not route.base_url:
        raise ConfigError(
            f"gateway.http.models.{name}: provider 'custom' needs base_url",
            key=f"gateway.http.models.{name}.base_url",
        )
    return ProviderSettings(
        provider=route.provider,
        model=route.model,
        base_url=route.base_url,
        api_key=api_key,
        timeout_s=config.model.timeout_s,
        stream_deadline_s=config.model.stream_deadline_s,
        max_retries=config.model.max_retries,
    )
