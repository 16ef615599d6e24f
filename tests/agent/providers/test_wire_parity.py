"""Our providers post their own bodies through the SDK client; the server sees what `create` sends.

Contracts tested against:
- openai README, "Making custom/undocumented requests": `client.post(path, cast_to=..., body=...)`
  goes through the client's own options (headers, auth, retries setting, timeouts). In openai 3.57,
  `chat.completions.create` and `responses.create` are that `post` to `/chat/completions` and
  `/responses`, with the body walked by `async_maybe_transform` and `security={"bearer_auth":
  True}`; anthropic 2.14 `messages.create` posts its keywords to `/v1/messages`.
- The Chat Completions, Responses and Messages API references: the request body is one JSON
  object; the member order of a JSON object carries no meaning (RFC 8259 section 4).

Each case sends one request through our provider and the same payload through the SDK's `create`
on a client built with the same settings, against one FakeLLM, and compares what the server
received (the JSON body parsed at the server, and every header), the reply, and the error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest

from agent.errors import ContextTooLong, ProviderError, ProviderUnavailable, RateLimited
from agent.messages import ChatMessage
from agent.providers._convert_anthropic import (
    AnthropicStreamAccumulator,
    reply_from_anthropic,
    request_to_anthropic,
)
from agent.providers._convert_openai import (
    OpenAIStreamAccumulator,
    reply_from_openai,
    request_to_openai,
)
from agent.providers._openai_sdk import OPENAI_ERRORS
from agent.providers._responses_convert import reply_from_response, request_to_responses
from agent.providers._responses_stream import ResponsesStreamAccumulator
from agent.providers._shell import SDK_READ_GRACE_S, map_sdk_errors
from agent.providers.anthropic import ANTHROPIC_ERRORS, AnthropicProvider, encode_body
from agent.providers.base import ProviderReply, ProviderRequest, ProviderSettings, ToolSpec
from agent.providers.openai_chat import OpenAIChatProvider
from agent.providers.openai_responses import OpenAIResponsesProvider
from sim.llm_server import FakeLLM, Turn
from tests.agent.providers.conftest import RecordingSleep

KEY = "sk-parity-key"
TIMEOUT_S = 5.0
STREAM_READ_S = TIMEOUT_S + SDK_READ_GRACE_S
"""The SDK read timeout our providers give a stream (silence, which is `timeout_s`, + grace)."""
WIRES = ["openai", "responses", "anthropic"]
LOOKUP = ToolSpec(
    name="lookup",
    description="Look something up",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)
CONVERSATION: list[ChatMessage] = [
    {"role": "system", "content": "Be brief. Grüße, 日本語, emoji 🙂 stay as they are."},
    {"role": "user", "content": "find the weather in Zürich", "_id": 3, "_persisted": True},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": "Zürich"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 °C"},
    {"role": "assistant", "content": "Sunny, 21 °C."},
    {"role": "user", "content": "and tomorrow?"},
]
CreateCall = Callable[[dict[str, Any], bool], Awaitable[ProviderReply]]
"""`(payload, streamed)`: the same request through the SDK's `create`, folded into a reply."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pair:
    """One wire: our provider, the payload it builds, and the SDK's `create` path beside it."""

    provider: Any
    payload: dict[str, Any]
    stream_fields: dict[str, Any]
    create: CreateCall
    errors: Callable[[], AbstractContextManager[None]]
    """`map_sdk_errors` as the provider applies it, for errors raised by `create`."""


def _settings(wire: str, url: str, max_retries: int) -> ProviderSettings:
    return ProviderSettings(
        provider="anthropic" if wire == "anthropic" else "openai",
        model="fake-model",
        base_url=url,
        api_key=KEY,
        timeout_s=TIMEOUT_S,
        max_retries=max_retries,
        api_mode="responses" if wire == "responses" else "chat_completions",
    )


def _request() -> ProviderRequest:
    return ProviderRequest(
        model="fake-model", messages=list(CONVERSATION), tools=(LOOKUP,), max_tokens=64
    )


def _timeout(streamed: bool) -> float:
    return STREAM_READ_S if streamed else TIMEOUT_S


@pytest.fixture
async def pairs(fake: FakeLLM, sleeps: RecordingSleep) -> AsyncIterator[Callable[[str, int], Pair]]:
    """`pairs(wire, max_retries)`; every client is closed at the end."""
    closing: list[Any] = []

    def make(wire: str, max_retries: int = 0) -> Pair:
        if wire == "openai":
            pair = _openai_pair(fake, sleeps, max_retries)
        elif wire == "responses":
            pair = _responses_pair(fake, sleeps, max_retries)
        else:
            pair = _anthropic_pair(fake, sleeps, max_retries)
        closing.append(pair.provider)
        return pair

    yield make
    for provider in closing:
        await provider.aclose()


def _openai_pair(fake: FakeLLM, sleeps: RecordingSleep, max_retries: int) -> Pair:
    provider = OpenAIChatProvider(
        _settings("openai", fake.openai_base_url, max_retries),
        accepts_cache_control=False,
        sleep=sleeps,
    )
    payload = request_to_openai(
        _request(), accepts_cache_control=False, max_tokens_key="max_completion_tokens"
    )

    async def create(body: dict[str, Any], streamed: bool) -> ProviderReply:
        async with openai.AsyncOpenAI(
            api_key=KEY,
            base_url=fake.openai_base_url,
            timeout=TIMEOUT_S,
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(timeout=TIMEOUT_S),
        ) as client:
            if not streamed:
                done = await client.chat.completions.create(**body, timeout=TIMEOUT_S)
                return reply_from_openai(done.model_dump(mode="json"))
            folded = OpenAIStreamAccumulator()
            stream = await client.chat.completions.create(
                **body,
                stream=True,
                stream_options={"include_usage": True},
                timeout=STREAM_READ_S,
            )
            async for chunk in stream:
                folded.add(chunk.model_dump(mode="json"))
            return reply_from_openai(folded.completion())

    return Pair(
        provider=provider,
        payload=payload,
        stream_fields={"stream": True, "stream_options": {"include_usage": True}},
        create=create,
        errors=lambda: map_sdk_errors(
            OPENAI_ERRORS,
            provider="openai",
            model="fake-model",
            where=fake.openai_base_url,
            secret=KEY,
        ),
    )


def _responses_pair(fake: FakeLLM, sleeps: RecordingSleep, max_retries: int) -> Pair:
    provider = OpenAIResponsesProvider(
        _settings("responses", fake.openai_base_url, max_retries), sleep=sleeps
    )
    payload = request_to_responses(_request(), endpoint=provider.endpoint, context_management=None)

    async def create(body: dict[str, Any], streamed: bool) -> ProviderReply:
        async with openai.AsyncOpenAI(
            api_key=KEY, base_url=fake.openai_base_url, timeout=TIMEOUT_S, max_retries=0
        ) as client:
            if not streamed:
                done = await client.responses.create(**body, timeout=TIMEOUT_S)
                return reply_from_response(done.model_dump(mode="json"), endpoint=provider.endpoint)
            folded = ResponsesStreamAccumulator()
            stream = await client.responses.create(**body, stream=True, timeout=STREAM_READ_S)
            async for event in stream:
                folded.add(event.model_dump(mode="json"))
            return reply_from_response(folded.response(), endpoint=provider.endpoint)

    return Pair(
        provider=provider,
        payload=payload,
        stream_fields={"stream": True},
        create=create,
        errors=lambda: map_sdk_errors(
            OPENAI_ERRORS,
            provider="openai",
            model="fake-model",
            where=fake.openai_base_url,
            secret=KEY,
        ),
    )


def _anthropic_pair(fake: FakeLLM, sleeps: RecordingSleep, max_retries: int) -> Pair:
    provider = AnthropicProvider(
        _settings("anthropic", fake.anthropic_base_url, max_retries), sleep=sleeps
    )
    payload = request_to_anthropic(_request())

    async def create(body: dict[str, Any], streamed: bool) -> ProviderReply:
        async with anthropic.AsyncAnthropic(
            api_key=KEY,
            base_url=fake.anthropic_base_url,
            timeout=TIMEOUT_S,
            max_retries=0,
            http_client=anthropic.DefaultAioHttpClient(timeout=TIMEOUT_S),
        ) as client:
            if not streamed:
                done = await client.messages.create(**body, timeout=TIMEOUT_S)
                return reply_from_anthropic(done.model_dump(mode="json"))
            folded = AnthropicStreamAccumulator()
            stream = await client.messages.create(**body, stream=True, timeout=STREAM_READ_S)
            async for event in stream:
                folded.add(event.model_dump(mode="json"))
            return reply_from_anthropic(folded.message)

    return Pair(
        provider=provider,
        payload=payload,
        stream_fields={"stream": True},
        create=create,
        errors=lambda: map_sdk_errors(
            ANTHROPIC_ERRORS,
            provider="anthropic",
            model="fake-model",
            where=fake.anthropic_base_url,
            secret=KEY,
        ),
    )


def _prompt_and_output(reply: ProviderReply) -> tuple[int, int]:
    usage = reply.usage
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return prompt, usage.output_tokens


async def _ignore(_: str) -> None:
    return None


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("wire", WIRES)
async def test_the_server_receives_what_create_sends(
    fake: FakeLLM, pairs: Callable[[str], Pair], wire: str, streamed: bool
) -> None:
    """The body on the wire is our built dict (plus the stream fields), equal to the one `create`
    sends; every header is the same; the reply folds the same (streamed: the same events)."""
    pair = pairs(wire)
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    ours = await pair.provider.complete(_request(), on_text=on_text if streamed else None)
    theirs = await pair.create(dict(pair.payload), streamed)
    sent, reference = await fake.wait_requests(2)
    expected = {**pair.payload, **(pair.stream_fields if streamed else {})}
    assert sent.json == expected
    assert reference.json == expected
    assert "'_persisted'" not in repr(sent.json)
    assert sent.path == reference.path
    assert sent.headers.keys() == reference.headers.keys()
    differing = {k for k in sent.headers if sent.headers[k] != reference.headers[k]}
    assert differing <= {"content-length"}, differing
    assert (ours.message, ours.stop_reason) == (theirs.message, theirs.stop_reason)
    assert _prompt_and_output(ours) == _prompt_and_output(theirs)  # the second one is cached
    assert ours.message["content"] == "echo: and tomorrow?"
    if streamed:
        assert "".join(deltas) == ours.message["content"] and len(deltas) > 1


def test_anthropic_body_is_encoded_as_the_sdk_encodes_it() -> None:
    """`encode_body` is byte for byte the SDK's own body encoding (non-ASCII kept as UTF-8)."""
    from anthropic._utils._json import openapi_dumps

    payload = request_to_anthropic(_request())
    assert encode_body(payload) == openapi_dumps(payload)
    assert "日本語".encode() in encode_body(payload)


OVERFLOW = {
    "openai": (
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9000 tokens.",
        "context_length_exceeded",
    ),
    "responses": (
        "Your input exceeds the context window of this model.",
        "context_length_exceeded",
    ),
    "anthropic": ("prompt is too long: 210000 tokens > 200000 maximum", None),
}
ERRORS: dict[str, tuple[int, str, type[ProviderError]]] = {
    "rate_limit": (429, "rate_limit_error", RateLimited),
    "context_overflow": (400, "invalid_request_error", ContextTooLong),
    "server_error": (500, "api_error", ProviderUnavailable),
}


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("case", list(ERRORS))
@pytest.mark.parametrize("wire", WIRES)
async def test_errors_map_as_they_did_through_create(
    fake: FakeLLM, pairs: Callable[[str], Pair], wire: str, case: str, streamed: bool
) -> None:
    """429 with retry-after-ms, a 400 in the API's overflow wording, a 500: each leaves our
    provider as the same `agent.errors` kind, detail and pause as the same error raised by
    `create` and mapped by the shell."""
    status, kind, error = ERRORS[case]
    message, code = OVERFLOW[wire] if case == "context_overflow" else (f"{kind} here", None)
    turn = Turn(error=(status, kind, message), error_code=code, retry_after_ms=1500)
    fake.script(turn, turn)
    pair = pairs(wire)
    with pytest.raises(error) as ours:
        await pair.provider.complete(_request(), on_text=_ignore if streamed else None)
    with pytest.raises(error) as theirs, pair.errors():
        await pair.create(dict(pair.payload), streamed)
    assert str(ours.value) == str(theirs.value)
    assert vars(ours.value) == vars(theirs.value)
    if case == "rate_limit":
        assert isinstance(ours.value, RateLimited) and ours.value.retry_after_s == 1.5
