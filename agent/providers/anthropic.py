"""Anthropic Messages API behind `Provider`: convert, call (streamed or not), translate errors.

Only `agent.providers.registry` imports this module, and only when the `anthropic` provider is
built, so the SDK's import cost is paid by those who use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from agent.errors import ProviderError
from agent.providers._convert_anthropic import (
    AnthropicStreamAccumulator,
    reply_from_anthropic,
    request_to_anthropic,
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
    import anthropic
    import httpx2
except ImportError as exc:  # pragma: no cover - exercised only without the SDK
    raise ImportError(
        "the anthropic provider needs the anthropic SDK, a core dependency of Hermes: reinstall with "
        "pip install -c constraints.txt -e ."
    ) from exc

__all__ = ["AnthropicProvider"]

PROVIDER = "anthropic"

log = structlog.get_logger(__name__)


class AnthropicProvider:
    """`Provider` over `anthropic.AsyncAnthropic`; retries are ours, the SDK's are off."""

    name = PROVIDER

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._settings = settings
        self._sleep = sleep
        self._client = anthropic.AsyncAnthropic(
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_s,
            max_retries=0,
            # aiohttp's pool: httpx's checks every pooled connection on every request, which
            # cost ~1.5 ms a call with 100 sessions in flight (bench_gateway.py).
            http_client=anthropic.DefaultAioHttpClient(timeout=settings.timeout_s),
        )

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        """One model call with bounded retries; streamed text is never replayed by a retry."""
        kwargs = request_to_anthropic(request)
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
                message = await self._client.messages.create(
                    **kwargs, timeout=self._settings.timeout_s
                )
        return reply_from_anthropic(message.model_dump(mode="json"))

    async def _stream(self, kwargs: dict[str, Any], on_text: OnText) -> ProviderReply:
        """Consume raw stream events; each text delta goes to `on_text` as it arrives."""
        accumulator = AnthropicStreamAccumulator()
        with self._map_errors(kwargs["model"]):
            stream = await self._client.messages.create(
                **kwargs, stream=True, timeout=self._settings.timeout_s
            )
            async with stream:
                async for event in stream:
                    delta = accumulator.add(event.model_dump(mode="json"))
                    if delta:
                        await on_text(delta)
        return reply_from_anthropic(accumulator.message)

    @contextmanager
    def _map_errors(self, model: str) -> Iterator[None]:
        """Translate every SDK and transport failure into `agent.errors`, once, here."""
        try:
            yield
        except anthropic.APIStatusError as exc:
            raise _status_error(exc, model, self._settings.api_key) from exc
        except (anthropic.APIConnectionError, httpx2.TransportError, TimeoutError) as exc:
            detail = f"cannot reach {self._settings.base_url or 'api.anthropic.com'}: {exc}"
            raise build_error("unavailable", PROVIDER, model, detail) from exc
        except anthropic.APIResponseValidationError as exc:
            detail = f"unexpected response shape: {exc}"
            raise build_error("bad_request", PROVIDER, model, detail) from exc


def _status_error(exc: anthropic.APIStatusError, model: str, secret: str | None) -> ProviderError:
    message = exc.api_message or exc.message or ""
    error_type = exc.type if isinstance(exc.type, str) else None
    kind = classify_status(exc.status_code, message, error_type=error_type)
    retry_after_s = retry_after_from_headers(exc.response.headers)
    detail = describe_failure(exc.status_code, message, secret=secret)
    return build_error(kind, PROVIDER, model, detail, retry_after_s=retry_after_s)
