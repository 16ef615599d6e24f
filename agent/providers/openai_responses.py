"""OpenAI Responses API behind `Provider`: api.openai.com (`api_mode: responses`) and Codex OAuth.

Stateless on purpose: `store=False` and never `previous_response_id`; the client replays the
transcript, including opaque items kept on assistant messages (see `_responses_convert`).
Native server-side compaction is gated per request by `agent.codex.native_compaction`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from agent.codex.native_compaction import (
    CODEX_PROVIDER,
    endpoint_of,
    is_native_rejection,
    native_compaction_field,
    resolved_base_url,
)
from agent.errors import BadRequest, ProviderError
from agent.providers._error_kinds import (
    ErrorKind,
    build_error,
    classify_status,
    describe_failure,
    retry_after_from_headers,
)
from agent.providers._responses_convert import reply_from_response, request_to_responses
from agent.providers._responses_stream import ResponsesStreamAccumulator, StreamFailed
from agent.providers.base import OnText, ProviderReply, ProviderRequest, ProviderSettings
from agent.providers.retry import complete_once_shown

try:
    import httpx2
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the SDK
    raise ImportError(
        "the Responses and Codex routes need the openai SDK: "
        "pip install 'hermes-runtime[openai]' (or pip install openai)"
    ) from exc

__all__ = ["DEFAULT_COMPACT_THRESHOLD", "OpenAIResponsesProvider"]

DEFAULT_COMPACT_THRESHOLD = 200_000
_NO_LOCAL_TRIGGER = 1 << 40
"""Without a wired local trigger the configured compact threshold applies unclamped."""

log = structlog.get_logger(__name__)


class _NativeRejected(BadRequest):
    """The server refused the `context_management` field itself (a structured 400)."""


class OpenAIResponsesProvider:
    """`Provider` over `openai.AsyncOpenAI().responses`; our retries, the SDK's off."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        native_compaction: bool = False,
        compact_threshold: int = DEFAULT_COMPACT_THRESHOLD,
        local_trigger_tokens: Callable[[], int] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        """`local_trigger_tokens` reports the local compressor's trigger (re-read per request);
        `http_client` is a seam for tests and proxies."""
        self.name = settings.provider
        self._settings = settings
        self._native_enabled = native_compaction
        self._compact_threshold = compact_threshold
        self._local_trigger = local_trigger_tokens or (lambda: _NO_LOCAL_TRIGGER)
        self._native_disabled = False
        self._sleep = sleep
        self._is_codex = settings.provider == CODEX_PROVIDER
        self._base_url = resolved_base_url(provider=settings.provider, base_url=settings.base_url)
        self.endpoint = endpoint_of(provider=settings.provider, base_url=settings.base_url)
        """The issuer tag put on (and required of) replayed items."""
        self._client = openai.AsyncOpenAI(
            api_key=settings.api_key or "",
            base_url=self._base_url,
            timeout=settings.timeout_s,
            max_retries=0,
            default_headers=_codex_headers(settings.api_key) if self._is_codex else None,
            http_client=http_client,
        )

    @property
    def native_compaction_disabled(self) -> bool:
        """True once the server rejected the field in this session."""
        return self._native_disabled

    def reset_session(self) -> None:
        """A new session may try native compaction again."""
        self._native_disabled = False

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        """One call; a structured rejection of native compaction is retried once without it."""
        field = native_compaction_field(
            enabled=self._native_enabled,
            model=request.model,
            base_url=self._settings.base_url,
            provider=self._settings.provider,
            local_trigger_tokens=self._local_trigger(),
            configured_threshold=self._compact_threshold,
            disabled_for_session=self._native_disabled,
        )
        try:
            reply = await self._complete_with_retries(request, field, on_text)
        except _NativeRejected as exc:
            self._native_disabled = True
            log.warning(
                "native_compaction_disabled",
                provider=self.name,
                model=request.model,
                detail=exc.detail,
            )
            reply = await self._complete_with_retries(request, None, on_text)
        log.debug(
            "provider_replied",
            provider=self.name,
            model=reply.model,
            stop_reason=reply.stop_reason,
            input_tokens=reply.usage.input_tokens,
            cache_read_tokens=reply.usage.cache_read_tokens,
            native_compaction=reply.raw.get("native_compaction", False),
        )
        return reply

    async def aclose(self) -> None:
        await self._client.close()

    async def _complete_with_retries(
        self, request: ProviderRequest, field: dict[str, Any] | None, on_text: OnText | None
    ) -> ProviderReply:
        kwargs = request_to_responses(
            request,
            endpoint=self.endpoint,
            context_management=field,
            send_max_tokens=not self._is_codex,  # the Codex backend refuses max_output_tokens
        )
        return await complete_once_shown(
            lambda: self._create(kwargs, field is not None),
            lambda forward: self._stream(kwargs, forward, field is not None),
            on_text=on_text,
            max_retries=self._settings.max_retries,
            sleep=self._sleep,
            stream_always=self._is_codex,  # the Codex backend only streams
        )

    async def _create(self, kwargs: dict[str, Any], native: bool) -> ProviderReply:
        with self._map_errors(kwargs["model"], native):
            async with asyncio.timeout(self._settings.timeout_s):
                response = await self._client.responses.create(
                    **kwargs, timeout=self._settings.timeout_s
                )
        return reply_from_response(response.model_dump(mode="json"), endpoint=self.endpoint)

    async def _stream(self, kwargs: dict[str, Any], on_text: OnText, native: bool) -> ProviderReply:
        """Text deltas go to `on_text`; the final response comes from `response.completed`."""
        accumulator = ResponsesStreamAccumulator()
        with self._map_errors(kwargs["model"], native):
            # the SDK timeout bounds the connect and every read; a long answer may stream on
            stream = await self._client.responses.create(
                **kwargs, stream=True, timeout=self._settings.timeout_s
            )
            async with stream:
                async for event in stream:
                    delta = accumulator.add(event.model_dump(mode="json"))
                    if delta:
                        await on_text(delta)
        return reply_from_response(accumulator.response(), endpoint=self.endpoint)

    @contextmanager
    def _map_errors(self, model: str, native: bool) -> Iterator[None]:
        """Translate every SDK and transport failure into `agent.errors`, once, here."""
        try:
            yield
        except openai.APIStatusError as exc:
            raise self._status_error(exc, model, native) from exc
        except StreamFailed as exc:
            detail = describe_failure(None, f"{exc.code or 'error'}: {exc.message}", secret=None)
            kind: ErrorKind = (
                "context_too_long" if exc.code == "context_length_exceeded" else "unavailable"
            )
            raise build_error(kind, self.name, model, detail) from exc
        except (openai.APIConnectionError, httpx2.TransportError, TimeoutError) as exc:
            detail = f"cannot reach {self._base_url or 'the endpoint'}: {type(exc).__name__}"
            raise build_error("unavailable", self.name, model, detail) from exc
        except openai.APIResponseValidationError as exc:
            raise build_error(
                "bad_request", self.name, model, f"unexpected response: {exc}"
            ) from exc
        except openai.APIError as exc:  # an error event inside the stream
            raise build_error("unavailable", self.name, model, str(exc.message)) from exc

    def _status_error(self, exc: openai.APIStatusError, model: str, native: bool) -> ProviderError:
        body = exc.body if isinstance(exc.body, dict) else {}
        message = str(body.get("message") or exc.message or "")
        param = body.get("param") if isinstance(body.get("param"), str) else None
        code = exc.code if isinstance(exc.code, str) else None
        detail = describe_failure(exc.status_code, message, secret=self._settings.api_key)
        if native and is_native_rejection(exc.status_code, message, param=param, code=code):
            return _NativeRejected(self.name, model, detail)
        error_type = exc.type if isinstance(exc.type, str) else None
        kind = classify_status(exc.status_code, message, error_type=error_type, code=code)
        retry_after_s = retry_after_from_headers(exc.response.headers)
        return build_error(kind, self.name, model, detail, retry_after_s=retry_after_s)


def _codex_headers(access_token: str | None) -> dict[str, str]:
    """The Codex backend wants the ChatGPT account id, which the OAuth JWT carries."""
    account = _jwt_account_id(access_token or "")
    return {"chatgpt-account-id": account} if account else {}


def _jwt_account_id(token: str) -> str | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    padded = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (binascii.Error, ValueError):
        return None
    auth = claims.get("https://api.openai.com/auth") if isinstance(claims, dict) else None
    account = auth.get("chatgpt_account_id") if isinstance(auth, dict) else None
    return account if isinstance(account, str) and account else None
