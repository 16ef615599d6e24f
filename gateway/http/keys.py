"""The HTTP API's bearer keys: resolved once from config and the environment, matched in
constant time, known to the rest of the gateway only by their names.

The single `gateway.http.api_key` (or HERMES_API_KEY) is one admin key named "default";
`gateway.http.keys` adds named keys, each with a role and tools (`gateway.principals`).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.config import HttpApiConfig
from agent.errors import ConfigError
from gateway.principals import DEFAULT_HTTP_KEY

__all__ = ["ApiKey", "match_key", "resolve_keys"]


@dataclass(frozen=True, slots=True)
class ApiKey:
    name: str
    secret: bytes = field(repr=False)
    """Never logged: `repr` leaves it out."""


def resolve_keys(
    http: HttpApiConfig, api_key: str | None, environ: Mapping[str, str]
) -> tuple[ApiKey, ...]:
    """Every key the API accepts; a ConfigError naming the key when one cannot be had."""
    keys: list[ApiKey] = []
    if api_key:
        keys.append(ApiKey(DEFAULT_HTTP_KEY, api_key.encode()))
    for index, entry in enumerate(http.keys):
        secret = entry.key if entry.key is not None else environ.get(entry.key_env or "")
        if not secret:
            raise ConfigError(
                f"gateway.http.keys[{index}] ({entry.name}): the environment variable "
                f"{entry.key_env} is not set",
                key=f"gateway.http.keys.{index}.key_env",
            )
        keys.append(ApiKey(entry.name, secret.encode()))
    if not keys:
        raise ConfigError(
            "the HTTP API needs a key: set gateway.http.api_key or HERMES_API_KEY, "
            "or list keys under gateway.http.keys",
            key="gateway.http.api_key",
        )
    return tuple(keys)


def match_key(keys: Sequence[ApiKey], authorization: str) -> str | None:
    """The name of the key an `Authorization: Bearer …` header carries, or None. Every key is
    compared (in constant time each), so the answer's timing does not say which one matched."""
    if not authorization.startswith("Bearer "):
        return None
    token = authorization.removeprefix("Bearer ").strip().encode("utf-8", "surrogateescape")
    found: str | None = None
    for key in keys:
        if hmac.compare_digest(token, key.secret) and found is None:
            found = key.name
    return found
