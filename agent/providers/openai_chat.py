"""OpenAI Chat Completions behind `Provider`, for OpenAI, OpenRouter and any compatible server.

Only `agent.providers.registry` imports this module, and only when one of those providers is
built, so the SDK's import cost is paid by those who use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from agent.errors import ProviderError
from agent.providers._convert_openai import (
    OpenAIStreamAccumulator,
    reply_from_openai,
    request_to_openai,
)
from agent.providers._error_kinds import (
    build_error,
    classify_status,
    describe_failure,
    retry_after_from_headers,
)
from agent.providers.base import OnText, ProviderReply, ProviderRequest, ProviderSettings
from agent.providers.retry import complete_once_shown

try:
    import httpx2
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the SDK
    raise ImportError(
        "the openai provider needs the openai SDK, a core dependency of Hermes: reinstall with "
        "pip install -c constraints.txt -e ."
    ) from exc

__all__ = ["OPENROUTER_BASE_URL", "PLACEHOLDER_API_KEY", "OpenAIChatProvider"]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
PLACEHOLDER_API_KEY = "not-needed"
"""Sent to OpenAI-compatible local servers (Ollama, llama.cpp, vLLM) that want no key."""

log = structlog.get_logger(__name__)


class OpenAIChatProvider:
    """`Provider` over `openai.AsyncOpenAI` Chat Completions; retries are ours, the SDK's off."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        accepts_cache_control: bool,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.name = settings.provider
        self._settings = settings
        self._accepts_cache_control = accepts_cache_control
        self._sleep = sleep
        base_url = settings.base_url
        if base_url is None and settings.provider == "openrouter":
            base_url = OPENROUTER_BASE_URL
        self._base_url = base_url
        self._client = openai.AsyncOpenAI(
            api_key=settings.api_key or PLACEHOLDER_API_KEY,
            base_url=base_url,
            timeout=settings.timeout_s,
            max_retries=0,
            # aiohttp's pool: httpx's checks every pooled connection on every request, which
            # cost ~1.5 ms a call with 100 sessions in flight (bench_gateway.py).
            http_client=openai.DefaultAioHttpClient(timeout=settings.timeout_s),
        )

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        """One model call with bounded retries; streamed text is never replayed by a retry."""
        kwargs = request_to_openai(
            request,
            accepts_cache_control=self._accepts_cache_control,
            max_tokens_key="max_completion_tokens" if self.name == "openai" else "max_tokens",
        )
        return await complete_once_shown(
            lambda: self._create(kwargs),
            lambda forward: self._stream(kwargs, forward),
            on_text=on_text,
            max_retries=self._settings.max_retries,
            sleep=self._sleep,
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def _create(self, kwargs: dict[str, Any]) -> ProviderReply:
        with self._map_errors(kwargs["model"]):
            async with asyncio.timeout(self._settings.timeout_s):
                completion = await self._client.chat.completions.create(
                    **kwargs, timeout=self._settings.timeout_s
                )
        return reply_from_openai(completion.model_dump(mode="json"))

    async def _stream(self, kwargs: dict[str, Any], on_text: OnText) -> ProviderReply:
        """Consume chunks; text deltas go to `on_text`, tool-call deltas are joined by index."""
        accumulator = OpenAIStreamAccumulator()
        with self._map_errors(kwargs["model"]):
            stream = await self._client.chat.completions.create(
                **kwargs,
                stream=True,
                stream_options={"include_usage": True},
                timeout=self._settings.timeout_s,
            )
            async with stream:
                async for chunk in stream:
                    delta = accumulator.add(chunk.model_dump(mode="json"))
                    if delta:
                        await on_text(delta)
        return reply_from_openai(accumulator.completion())

    @contextmanager
    def _map_errors(self, model: str) -> Iterator[None]:
        """Translate every SDK and transport failure into `agent.errors`, once, here."""
        try:
            yield
        except openai.APIStatusError as exc:
            raise _status_error(exc, self.name, model, self._settings.api_key) from exc
        except (openai.APIConnectionError, httpx2.TransportError, TimeoutError) as exc:
            where = self._base_url or "api.openai.com"
            detail = f"cannot reach {where}: {exc}"
            raise build_error("unavailable", self.name, model, detail) from exc
        except openai.APIResponseValidationError as exc:
            detail = f"unexpected response shape: {exc}"
            raise build_error("bad_request", self.name, model, detail) from exc


def _status_error(
    exc: openai.APIStatusError, provider: str, model: str, secret: str | None
) -> ProviderError:
    body = exc.body if isinstance(exc.body, dict) else {}
    message = str(body.get("message") or exc.message or "")
    error_type = exc.type if isinstance(exc.type, str) else None
    code = exc.code if isinstance(exc.code, str) else None
    kind = classify_status(exc.status_code, message, error_type=error_type, code=code)
    retry_after_s = retry_after_from_headers(exc.response.headers)
    detail = describe_failure(exc.status_code, message, secret=secret)
    return build_error(kind, provider, model, detail, retry_after_s=retry_after_s)
