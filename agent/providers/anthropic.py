"""Anthropic Messages API behind `Provider`: the payload, one call or one stream, the SDK's errors.

Retries, deadlines and the error shape common to both SDKs live in `agent.providers._shell`.
Only `agent.providers.registry` imports this module, and only when the `anthropic` provider is
built, so the SDK's import cost is paid by those who use it.

The request goes through the client's low-level `post` with the body already encoded (`content`),
as `messages.create` would send it: `create` only gathers its keywords into that body (and reads
the model's deprecation notice), but the client copies every body through
`async_prepare_request_data` before sending it (a walk of every message, for file inputs we
never send); the encoding is the SDK's own (`ensure_ascii=False`, compact separators, no NaN).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager

from agent.providers._convert_anthropic import (
    AnthropicStreamAccumulator,
    reply_from_anthropic,
    request_to_anthropic,
)
from agent.providers._error_kinds import HTTPFailure
from agent.providers._shell import (
    SDKProvider,
    StatusHook,
    WirePayload,
    first_byte,
    map_sdk_errors,
    missing_sdk,
    pump_stream,
    sdk_errors,
    typed_body,
)
from agent.providers.base import OnText, ProviderReply, ProviderRequest, ProviderSettings
from agent.providers.tls import sdk_ssl_context

try:
    import anthropic
except ImportError as exc:  # pragma: no cover - exercised only without the SDK
    raise missing_sdk("anthropic", used_by="the anthropic provider") from exc

__all__ = ["AnthropicProvider"]

PROVIDER = "anthropic"
DEFAULT_HOST = "api.anthropic.com"
PATH = "/v1/messages"
"""Where `messages.create` posts, relative to the base URL."""


def encode_body(payload: WirePayload) -> bytes:
    """The request body as `messages.create` sends it (anthropic `_utils._json.openapi_dumps`)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _read_status(exc: anthropic.APIStatusError) -> HTTPFailure:
    return HTTPFailure(
        status=exc.status_code,
        message=exc.api_message or exc.message or "",
        error_type=exc.type if isinstance(exc.type, str) else None,
        headers=exc.response.headers,
    )


ANTHROPIC_ERRORS = sdk_errors(anthropic, anthropic.APIStatusError, _read_status)


class AnthropicProvider(SDKProvider):
    """`Provider` over `anthropic.AsyncAnthropic`; retries are ours, the SDK's are off."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        super().__init__(PROVIDER, settings, sleep=sleep)
        self._client = anthropic.AsyncAnthropic(
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_s,
            max_retries=0,
            # aiohttp's pool: httpx's checks every pooled connection on every request, which
            # cost ~1.5 ms a call with 100 sessions in flight (bench_gateway.py).
            http_client=anthropic.DefaultAioHttpClient(
                timeout=settings.timeout_s, verify=sdk_ssl_context()
            ),
        )

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        """One model call with bounded retries; streamed text is never replayed by a retry."""
        return await self._call(request_to_anthropic(request), on_text)

    async def aclose(self) -> None:
        await self._client.close()

    async def _create(self, payload: WirePayload) -> ProviderReply:
        message = await self._client.post(
            PATH,
            content=encode_body(payload),
            cast_to=anthropic.types.Message,
            options={"timeout": self._settings.timeout_s},
        )
        return reply_from_anthropic(typed_body(message).model_dump(mode="json"))

    async def _stream(self, payload: WirePayload, on_text: OnText) -> ProviderReply:
        """Raw stream events, folded; each text delta goes to `on_text` as it arrives."""
        accumulator = AnthropicStreamAccumulator()
        stream = await first_byte(
            self._client.post(
                PATH,
                content=encode_body({**payload, "stream": True}),
                cast_to=anthropic.types.Message,
                options={"timeout": self._stream_read_s},
                stream=True,
                stream_cls=anthropic.AsyncStream[anthropic.types.RawMessageStreamEvent],
            ),
            self._silence_s,
        )
        await pump_stream(stream, accumulator.add, on_text, silence_s=self._silence_s)
        return reply_from_anthropic(accumulator.message)

    def _map_errors(self, model: str, on_status: StatusHook | None) -> AbstractContextManager[None]:
        return map_sdk_errors(
            ANTHROPIC_ERRORS,
            provider=PROVIDER,
            model=model,
            where=self._settings.base_url or DEFAULT_HOST,
            secret=self._settings.api_key,
            on_status=on_status,
        )
