"""OpenAI Chat Completions behind `Provider`, for OpenAI, OpenRouter and any compatible server.

Retries, deadlines and the error shape common to both SDKs live in `agent.providers._shell`.
Only `agent.providers.registry` imports this module, and only when one of those providers is
built, so the SDK's import cost is paid by those who use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager

from agent.providers._convert_openai import (
    OpenAIStreamAccumulator,
    reply_from_openai,
    request_to_openai,
)
from agent.providers._openai_sdk import (
    OPENAI_ERRORS,
    ChatCompletion,
    ChatCompletionChunk,
    openai,
    request_options,
)
from agent.providers._shell import (
    SDKProvider,
    StatusHook,
    WirePayload,
    first_byte,
    map_sdk_errors,
    pump_stream,
    typed_body,
)
from agent.providers.base import OnText, ProviderReply, ProviderRequest, ProviderSettings
from agent.providers.tls import sdk_ssl_context

__all__ = ["OPENROUTER_BASE_URL", "PLACEHOLDER_API_KEY", "OpenAIChatProvider"]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
PLACEHOLDER_API_KEY = "not-needed"
"""Sent to OpenAI-compatible local servers (Ollama, llama.cpp, vLLM) that want no key."""
DEFAULT_HOST = "api.openai.com"
PATH = "/chat/completions"
"""Where `chat.completions.create` posts, relative to the base URL."""
STREAM_FIELDS = {"stream": True, "stream_options": {"include_usage": True}}


class OpenAIChatProvider(SDKProvider):
    """`Provider` over `openai.AsyncOpenAI` Chat Completions; retries are ours, the SDK's off."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        accepts_cache_control: bool,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        super().__init__(settings.provider, settings, sleep=sleep)
        self._accepts_cache_control = accepts_cache_control
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
            http_client=openai.DefaultAioHttpClient(
                timeout=settings.timeout_s, verify=sdk_ssl_context()
            ),
        )

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        """One model call with bounded retries; streamed text is never replayed by a retry."""
        payload = request_to_openai(
            request,
            accepts_cache_control=self._accepts_cache_control,
            max_tokens_key="max_completion_tokens" if self.name == "openai" else "max_tokens",
        )
        return await self._call(payload, on_text)

    async def aclose(self) -> None:
        await self._client.close()

    async def _create(self, payload: WirePayload) -> ProviderReply:
        """`chat.completions.create` without its per-request body walk (`_openai_sdk`)."""
        completion = await self._client.post(
            PATH,
            body=payload,
            cast_to=ChatCompletion,
            options=request_options(self._settings.timeout_s),
        )
        return reply_from_openai(typed_body(completion).model_dump(mode="json"))

    async def _stream(self, payload: WirePayload, on_text: OnText) -> ProviderReply:
        """Chunks, folded: text deltas go to `on_text`, tool-call deltas are joined by index."""
        accumulator = OpenAIStreamAccumulator()
        stream = await first_byte(
            self._client.post(
                PATH,
                body={**payload, **STREAM_FIELDS},
                cast_to=ChatCompletion,
                options=request_options(self._stream_read_s),
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            ),
            self._silence_s,
        )
        await pump_stream(stream, accumulator.add, on_text, silence_s=self._silence_s)
        return reply_from_openai(accumulator.completion())

    def _map_errors(self, model: str, on_status: StatusHook | None) -> AbstractContextManager[None]:
        return map_sdk_errors(
            OPENAI_ERRORS,
            provider=self.name,
            model=model,
            where=self._base_url or DEFAULT_HOST,
            secret=self._settings.api_key,
            on_status=on_status,
        )
