"""OpenAI Responses API behind `Provider`: api.openai.com (`api_mode: responses`) and Codex OAuth.

Stateless on purpose: `store=False` and never `previous_response_id`; the client replays the
transcript, including opaque items kept on assistant messages (see `_responses_convert`).
Native server-side compaction is gated per request by `agent.codex.native_compaction`.
Retries, deadlines and the error shape common to both SDKs live in `agent.providers._shell`.
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
    HTTPFailure,
    build_error,
    describe_failure,
)
from agent.providers._openai_sdk import (
    OPENAI_ERRORS,
    Response,
    ResponseStreamEvent,
    httpx2,
    openai,
    request_options,
)
from agent.providers._responses_convert import reply_from_response, request_to_responses
from agent.providers._responses_stream import ResponsesStreamAccumulator, StreamFailed
from agent.providers._shell import (
    SDKProvider,
    StatusHook,
    WirePayload,
    first_byte,
    map_sdk_errors,
    pump_stream,
    typed_body,
)
from agent.providers.base import (
    IncompleteReply,
    OnText,
    ProviderReply,
    ProviderRequest,
    ProviderSettings,
)
from agent.providers.tls import sdk_ssl_context

__all__ = ["DEFAULT_COMPACT_THRESHOLD", "OpenAIResponsesProvider"]

DEFAULT_COMPACT_THRESHOLD = 200_000
PATH = "/responses"
"""Where `responses.create` posts, relative to the base URL (`_openai_sdk`: why not `create`)."""
_NO_LOCAL_TRIGGER = 1 << 40
"""Without a wired local trigger the configured compact threshold applies unclamped."""

log = structlog.get_logger(__name__)


class _NativeRejected(BadRequest):
    """The server refused the `context_management` field itself (a structured 400)."""


class OpenAIResponsesProvider(SDKProvider):
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
        self._is_codex = settings.provider == CODEX_PROVIDER
        # the Codex backend only streams
        super().__init__(settings.provider, settings, sleep=sleep, streams_always=self._is_codex)
        self._native_enabled = native_compaction
        self._compact_threshold = compact_threshold
        self._local_trigger = local_trigger_tokens or (lambda: _NO_LOCAL_TRIGGER)
        self._native_disabled = False
        self._base_url = resolved_base_url(provider=settings.provider, base_url=settings.base_url)
        self.endpoint = endpoint_of(provider=settings.provider, base_url=settings.base_url)
        """The issuer tag put on (and required of) replayed items."""
        self._client = openai.AsyncOpenAI(
            api_key=settings.api_key or "",
            base_url=self._base_url,
            timeout=settings.timeout_s,
            max_retries=0,
            default_headers=_codex_headers(settings.api_key) if self._is_codex else None,
            http_client=http_client
            or openai.DefaultAsyncHttpxClient(timeout=settings.timeout_s, verify=sdk_ssl_context()),
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
            reply = await self._complete_with(request, field, on_text)
        except _NativeRejected as exc:
            self._native_disabled = True
            log.warning(
                "native_compaction_disabled",
                provider=self.name,
                model=request.model,
                detail=exc.detail,
            )
            reply = await self._complete_with(request, None, on_text)
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

    async def _complete_with(
        self, request: ProviderRequest, field: dict[str, Any] | None, on_text: OnText | None
    ) -> ProviderReply:
        payload = request_to_responses(
            request,
            endpoint=self.endpoint,
            context_management=field,
            send_max_tokens=not self._is_codex,  # the Codex backend refuses max_output_tokens
        )
        on_status = self._native_rejection if field is not None else None
        return await self._call(payload, on_text, on_status=on_status)

    async def _create(self, payload: WirePayload) -> ProviderReply:
        response = await self._client.post(
            PATH,
            body=payload,
            cast_to=Response,
            options=request_options(self._settings.timeout_s),
        )
        body = typed_body(response).model_dump(mode="json")
        return reply_from_response(body, endpoint=self.endpoint)

    async def _stream(self, payload: WirePayload, on_text: OnText) -> ProviderReply:
        """Text deltas go to `on_text`; the final response comes from `response.completed`."""
        accumulator = ResponsesStreamAccumulator()
        stream = await first_byte(
            self._client.post(
                PATH,
                body={**payload, "stream": True},
                cast_to=Response,
                options=request_options(self._stream_read_s),
                stream=True,
                stream_cls=openai.AsyncStream[ResponseStreamEvent],
            ),
            self._silence_s,
        )
        await pump_stream(stream, accumulator.add, on_text, silence_s=self._silence_s)
        if not accumulator.finished and not accumulator.has_items:
            raise IncompleteReply(
                "the stream ended without response.completed", partial=accumulator.text
            )
        return reply_from_response(accumulator.response(), endpoint=self.endpoint)

    @contextmanager
    def _map_errors(self, model: str, on_status: StatusHook | None) -> Iterator[None]:
        """The SDK's errors, and a failure the stream itself reported, into `agent.errors`."""
        try:
            with map_sdk_errors(
                OPENAI_ERRORS,
                provider=self.name,
                model=model,
                where=self._base_url or "the endpoint",
                secret=self._settings.api_key,
                on_status=on_status,
            ):
                yield
        except StreamFailed as exc:
            detail = describe_failure(None, f"{exc.code or 'error'}: {exc.message}", secret=None)
            kind: ErrorKind = (
                "context_too_long" if exc.code == "context_length_exceeded" else "unavailable"
            )
            raise build_error(kind, self.name, model, detail) from exc

    def _native_rejection(self, failure: HTTPFailure, model: str) -> ProviderError | None:
        """A structured 400 refusing `context_management` itself, told apart from other errors."""
        if not is_native_rejection(
            failure.status, failure.message, param=failure.param, code=failure.code
        ):
            return None
        detail = describe_failure(failure.status, failure.message, secret=self._settings.api_key)
        return _NativeRejected(self.name, model, detail)


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
