"""Ask a model endpoint whether it answers and takes the key: `GET …/models`, one request.

Used by `hermes setup` (to detect the model) and `hermes doctor` (to check the endpoint). The
vendors' model lists are the cheapest request that needs the key (docs.anthropic.com/en/api/
models-list: `GET /v1/models` with `x-api-key` and `anthropic-version`; platform.openai.com/docs/
api-reference/models/list: `GET /v1/models` with `Authorization: Bearer`; OpenRouter and local
OpenAI-compatible servers serve the same route, local ones without a key). The outcome is a
value; what to tell the person is decided from it (`probe_sentence`).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Literal, TypeAlias, assert_never

__all__ = [
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENROUTER_BASE_URL",
    "EndpointProbe",
    "ProbeKind",
    "default_base_url",
    "probe_endpoint",
    "probe_sentence",
]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
ANTHROPIC_VERSION = "2023-06-01"
PROBE_TIMEOUT_S = 5.0

ProbeKind: TypeAlias = Literal["ok", "unreachable", "auth", "error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointProbe:
    """What one `GET …/models` said."""

    kind: ProbeKind
    url: str
    models: tuple[str, ...] = ()
    """Model ids the endpoint lists (ok only)."""
    status: int | None = None
    detail: str = ""


def default_base_url(provider: str) -> str | None:
    """Where a hosted provider's API lives when `model.base_url` is not set."""
    return {
        "anthropic": ANTHROPIC_BASE_URL,
        "openai": OPENAI_BASE_URL,
        "openrouter": OPENROUTER_BASE_URL,
    }.get(provider)


async def probe_endpoint(
    provider: str, base_url: str | None, api_key: str | None, *, timeout_s: float = PROBE_TIMEOUT_S
) -> EndpointProbe:
    """List the endpoint's models with the key; never raises."""
    import aiohttp

    base = (base_url or default_base_url(provider) or "").rstrip("/")
    if provider == "anthropic":
        url = f"{base}/v1/models"
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            **({"x-api-key": api_key} if api_key else {}),
        }
    else:
        url = f"{base}/models"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with asyncio.timeout(timeout_s), aiohttp.ClientSession() as session:
            async with session.get(url, headers=headers) as response:
                status = response.status
                payload = await response.json(content_type=None) if status == 200 else None
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return EndpointProbe(kind="unreachable", url=url, detail=_reason(exc))
    except ValueError:
        return EndpointProbe(kind="error", url=url, status=200, detail="the answer is not JSON")
    if status in (401, 403):
        return EndpointProbe(kind="auth", url=url, status=status)
    if status != 200:
        return EndpointProbe(kind="error", url=url, status=status)
    entries = payload.get("data") if isinstance(payload, dict) else None
    models = tuple(
        str(e["id"]) for e in entries or () if isinstance(e, dict) and isinstance(e.get("id"), str)
    )
    return EndpointProbe(kind="ok", url=url, models=models)


def probe_sentence(probe: EndpointProbe, *, key_source: str) -> str:
    """What the probe found, in one clause (the caller adds what to do); `key_source` names
    the key that was sent (e.g. "the key in ANTHROPIC_API_KEY")."""
    match probe.kind:
        case "ok":
            count = f"{len(probe.models)} model{'s' if len(probe.models) != 1 else ''}"
            return f"{probe.url} answers and lists {count}"
        case "unreachable":
            return f"cannot reach {probe.url} ({probe.detail})"
        case "auth":
            return f"{probe.url} refused {key_source} ({probe.status})"
        case "error":
            detail = f": {probe.detail}" if probe.detail else ""
            return f"{probe.url} answered {probe.status}{detail}"
        case unreachable:
            assert_never(unreachable)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    cause = getattr(exc, "os_error", None)  # aiohttp's connector errors wrap the OSError
    if isinstance(cause, OSError) and cause.errno:
        return os.strerror(cause.errno).lower()
    text = str(exc).strip()
    for known in ("Connection refused", "Name or service not known", "No route to host"):
        if known.lower() in text.lower():
            return known.lower()
    return text.splitlines()[0][:120] if text else type(exc).__name__
