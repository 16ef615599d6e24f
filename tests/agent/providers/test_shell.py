"""The provider shell, through the real SDKs over loopback: deadlines, retries, error translation.

Contracts tested against:
- `asyncio.timeout` cancels the block and raises TimeoutError at its end
  (https://docs.python.org/3.11/library/asyncio-task.html#asyncio.timeout).
- The SDKs' `timeout=` bounds the connect and each read, not a whole stream: a read timer restarts
  with every chunk (openai/anthropic README "Timeouts"; the vendored httpx_aiohttp transport maps
  it to aiohttp's `ClientTimeout(sock_read=...)`), so a stream that trickles never trips it.
- Event order on the wire (the fakes copy it): Anthropic `message_start, ping,
  content_block_start, content_block_delta…`; Chat Completions a role chunk, then content chunks;
  Responses `response.created, response.in_progress, response.output_item.added,
  response.output_text.delta…`.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from agent.codex.native_compaction import CODEX_BASE_URL
from agent.errors import BadRequest, ProviderAuthError, ProviderUnavailable, RateLimited
from agent.providers._error_kinds import HTTPFailure
from agent.providers._openai_sdk import OPENAI_ERRORS
from agent.providers._shell import SDKErrors, map_sdk_errors, stream_deadline_s
from agent.providers.anthropic import ANTHROPIC_ERRORS, AnthropicProvider
from agent.providers.base import (
    STREAM_DEADLINE_FACTOR,
    ProviderRequest,
    ProviderSettings,
)
from agent.providers.openai_chat import OpenAIChatProvider
from agent.providers.openai_responses import OpenAIResponsesProvider
from sim.llm_server import FakeLLM, Turn
from tests.agent.providers.conftest import RecordingSleep

KEY = "sk-shell-secret"
GUARD_S = 3.0
"""Each test fails here rather than hang; well under the SDKs' own 5 s read timeout."""
TEXT = "The quick brown fox jumps over the lazy dog"
EVENTS_TO_FIRST_TEXT = {"anthropic": 4, "openai": 2, "responses": 4}
"""SSE events up to and including the first text delta, per wire format (see above)."""
EVENTS_BEFORE_TEXT = {"anthropic": 3, "openai": 1, "responses": 3}

SDK_APIS = ["anthropic", "openai"]


def _settings(api: str, url: str, **overrides: Any) -> ProviderSettings:
    fields: dict[str, Any] = {
        "provider": api,
        "model": "fake-model",
        "base_url": url,
        "api_key": KEY,
        "timeout_s": 5.0,
        "max_retries": 2,
    }
    fields.update(overrides)
    return ProviderSettings(**fields)


def _provider(
    api: str, fake: FakeLLM, sleeps: RecordingSleep, **overrides: Any
) -> AnthropicProvider | OpenAIChatProvider:
    if api == "anthropic":
        return AnthropicProvider(_settings(api, fake.anthropic_base_url, **overrides), sleep=sleeps)
    settings = _settings(api, fake.openai_base_url, **overrides)
    return OpenAIChatProvider(settings, accepts_cache_control=False, sleep=sleeps)


def _request() -> ProviderRequest:
    return ProviderRequest(
        model="fake-model", messages=[{"role": "user", "content": "go"}], max_tokens=100
    )


class _Deltas:
    """An `on_text` that keeps what the user was shown."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, delta: str) -> None:
        self.seen.append(delta)


@pytest.mark.parametrize("api", SDK_APIS)
async def test_stream_stalled_after_text_fails_at_the_deadline_and_is_not_retried(
    fake: FakeLLM, sleeps: RecordingSleep, api: str
) -> None:
    """A stream that showed text, then went silent, is ProviderUnavailable at its deadline, once."""
    fake.script(Turn(text=TEXT, stall_after_events=EVENTS_TO_FIRST_TEXT[api]), Turn(text="again"))
    provider = _provider(api, fake, sleeps, stream_deadline_s=0.3)
    deltas = _Deltas()
    async with asyncio.timeout(GUARD_S):
        with pytest.raises(ProviderUnavailable, match=r"no complete reply within 0\.3 s"):
            await provider.complete(_request(), on_text=deltas)
    await provider.aclose()
    assert deltas.seen == ["The "]
    assert len(fake.requests) == 1
    assert sleeps.delays == []


@pytest.mark.parametrize("api", SDK_APIS)
async def test_trickling_stream_is_cut_at_the_deadline(
    fake: FakeLLM, sleeps: RecordingSleep, api: str
) -> None:
    """A stream that never falls silent (so no read timeout fires) still ends at its deadline."""
    slow_text = " ".join(["word"] * 60)  # 60+ events, 0.05 s apart: 3 s to finish
    fake.script(Turn(text=slow_text, event_delay_s=0.05))
    provider = _provider(api, fake, sleeps, stream_deadline_s=0.4, max_retries=0)
    deltas = _Deltas()
    async with asyncio.timeout(GUARD_S):
        with pytest.raises(ProviderUnavailable, match=r"within 0\.4 s"):
            await provider.complete(_request(), on_text=deltas)
    await provider.aclose()
    assert "".join(deltas.seen) != slow_text
    assert len(fake.requests) == 1


@pytest.mark.parametrize("api", SDK_APIS)
async def test_stream_stalled_before_any_text_is_retried(
    fake: FakeLLM, sleeps: RecordingSleep, api: str
) -> None:
    """The rule is 'shown', not 'streamed': a stream that stalled before any text is retried."""
    fake.script(Turn(text="lost", stall_after_events=EVENTS_BEFORE_TEXT[api]), Turn(text="one two"))
    provider = _provider(api, fake, sleeps, stream_deadline_s=0.3)
    deltas = _Deltas()
    async with asyncio.timeout(GUARD_S):
        reply = await provider.complete(_request(), on_text=deltas)
    await provider.aclose()
    assert "".join(deltas.seen) == reply.message["content"] == "one two"
    assert len(fake.requests) == 2
    assert len(sleeps.delays) == 1


@pytest.mark.parametrize("api", SDK_APIS)
async def test_plain_call_past_its_deadline_is_retried(
    fake: FakeLLM, sleeps: RecordingSleep, api: str
) -> None:
    """A non-streamed call that times out shows nothing, so it is retried and can succeed."""
    fake.script(Turn(text="late", delay_s=2.0), Turn(text="in time"))
    provider = _provider(api, fake, sleeps, timeout_s=0.3)
    async with asyncio.timeout(GUARD_S):
        reply = await provider.complete(_request())
    await provider.aclose()
    assert reply.message["content"] == "in time"
    assert len(fake.requests) == 2
    assert len(sleeps.delays) == 1


@pytest.fixture
async def responses_fake() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


def _codex_stalling_after_text(
    responses_fake: FakeLLM, sleeps: RecordingSleep
) -> OpenAIResponsesProvider:
    """A Codex provider whose first reply stalls right after its first text delta."""
    stall = EVENTS_TO_FIRST_TEXT["responses"]
    responses_fake.script(Turn(text=TEXT, stall_after_events=stall), Turn(text="done"))
    settings = ProviderSettings(
        provider="openai-codex",
        model="gpt-5.6",
        api_key=KEY,
        timeout_s=5.0,
        stream_deadline_s=0.3,
        max_retries=2,
        api_mode="responses",
    )
    client = responses_fake.http_client_for(CODEX_BASE_URL)
    return OpenAIResponsesProvider(settings, http_client=client, sleep=sleeps)


async def test_codex_stream_without_on_text_is_retried_after_a_stall(
    responses_fake: FakeLLM, sleeps: RecordingSleep
) -> None:
    """The Codex route streams even without `on_text`; nothing was shown, so a stall is retried."""
    provider = _codex_stalling_after_text(responses_fake, sleeps)
    async with asyncio.timeout(GUARD_S):
        reply = await provider.complete(_request_for("gpt-5.6"))
    await provider.aclose()
    assert reply.message["content"] == "done"
    assert len(responses_fake.requests) == 2
    assert all(call.json["stream"] is True for call in responses_fake.requests)


async def test_codex_stream_that_showed_text_is_not_retried(
    responses_fake: FakeLLM, sleeps: RecordingSleep
) -> None:
    """With `on_text`, the first delta reached the user: the stall fails the call, once."""
    provider = _codex_stalling_after_text(responses_fake, sleeps)
    deltas = _Deltas()
    async with asyncio.timeout(GUARD_S):
        with pytest.raises(ProviderUnavailable, match=r"within 0\.3 s"):
            await provider.complete(_request_for("gpt-5.6"), on_text=deltas)
    await provider.aclose()
    assert deltas.seen == ["The "]
    assert len(responses_fake.requests) == 1


def _request_for(model: str) -> ProviderRequest:
    return ProviderRequest(model=model, messages=[{"role": "user", "content": "go"}])


def test_stream_deadline_defaults_to_a_multiple_of_timeout() -> None:
    """Unset, a streamed attempt may run STREAM_DEADLINE_FACTOR × timeout_s; set, the setting wins."""
    plain = ProviderSettings(provider="anthropic", model="m", timeout_s=120.0)
    assert stream_deadline_s(plain) == 120.0 * STREAM_DEADLINE_FACTOR
    tight = ProviderSettings(provider="anthropic", model="m", timeout_s=120.0, stream_deadline_s=9)
    assert stream_deadline_s(tight) == 9


def test_missing_sdk_says_what_to_reinstall() -> None:
    """Without its SDK each provider module says the SDK is a core dependency and how to reinstall.

    (There is no `hermes-runtime[openai]` extra: pyproject.toml lists both SDKs as dependencies.)
    """
    code = (
        "import importlib, sys\n"
        "sys.modules['openai'] = sys.modules['anthropic'] = None\n"
        "for name in ('openai_responses', 'openai_chat', 'anthropic'):\n"
        "    try:\n"
        "        importlib.import_module('agent.providers.' + name)\n"
        "    except ImportError as exc:\n"
        "        print(name, '|', exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    assert [line.split(" | ")[0] for line in out] == [
        "openai_responses",
        "openai_chat",
        "anthropic",
    ]
    for line in out:
        assert "core dependency of Hermes" in line
        assert "pip install -c constraints.txt -e ." in line
        assert "[openai]" not in line
    assert "the openai SDK is not installed" in out[0]
    assert "the anthropic SDK is not installed" in out[2]


_ANTHROPIC_REQUEST = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
_OPENAI_REQUEST = httpx2.Request("POST", "https://api.openai.com/v1/chat/completions")


def _anthropic_status(status: int, kind: str, message: str) -> Exception:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    response = httpx2.Response(
        status, json=body, headers={"retry-after-ms": "250"}, request=_ANTHROPIC_REQUEST
    )
    return anthropic.APIStatusError(message, response=response, body=body)


def _openai_status(status: int, kind: str, message: str) -> Exception:
    error = {"message": message, "type": kind, "param": None, "code": None}
    response = httpx2.Response(
        status, json={"error": error}, headers={"retry-after-ms": "250"}, request=_OPENAI_REQUEST
    )
    return openai.APIStatusError(message, response=response, body=error)


SDK_FAILURES: list[Any] = [
    (ANTHROPIC_ERRORS, _anthropic_status(401, "authentication_error", f"bad key {KEY}")),
    (OPENAI_ERRORS, _openai_status(401, "invalid_request_error", f"Incorrect API key {KEY}")),
]


@pytest.mark.parametrize(
    ("errors", "raised", "expected"),
    [
        (ANTHROPIC_ERRORS, _anthropic_status(401, "authentication_error", KEY), ProviderAuthError),
        (OPENAI_ERRORS, _openai_status(401, "invalid_request_error", KEY), ProviderAuthError),
        (ANTHROPIC_ERRORS, _anthropic_status(429, "rate_limit_error", "slow"), RateLimited),
        (OPENAI_ERRORS, _openai_status(429, "rate_limit_exceeded", "slow"), RateLimited),
        (ANTHROPIC_ERRORS, anthropic.APIConnectionError(request=_ANTHROPIC_REQUEST), None),
        (OPENAI_ERRORS, openai.APITimeoutError(request=_OPENAI_REQUEST), None),
        (OPENAI_ERRORS, httpx2.ReadError("reset"), None),
        (ANTHROPIC_ERRORS, TimeoutError(), None),
        (
            OPENAI_ERRORS,
            openai.APIResponseValidationError(
                httpx2.Response(200, request=_OPENAI_REQUEST), body=None
            ),
            BadRequest,
        ),
        (OPENAI_ERRORS, openai.APIError(f"stream error {KEY}", _OPENAI_REQUEST, body=None), None),
        (
            ANTHROPIC_ERRORS,
            anthropic.APIError("stream error", _ANTHROPIC_REQUEST, body=None),
            None,
        ),
    ],
)
def test_both_sdks_fail_the_same_way(
    errors: SDKErrors[Any], raised: Exception, expected: type[Exception] | None
) -> None:
    """Each SDK's failure lands in the same `agent.errors` kind; the key never rides along.

    None means ProviderUnavailable: unreachable, timed out, or an error event inside a stream.
    """
    kind = expected or ProviderUnavailable
    with pytest.raises(kind) as caught:
        with map_sdk_errors(errors, provider="p", model="m", where="example.test", secret=KEY):
            raise raised
    assert KEY not in str(caught.value)
    assert caught.value.__cause__ is raised
    if isinstance(caught.value, RateLimited):
        assert caught.value.retry_after_s == 0.25


@pytest.mark.parametrize(("errors", "raised"), SDK_FAILURES)
def test_a_status_hook_claims_a_failure_first(errors: SDKErrors[Any], raised: Exception) -> None:
    """`on_status` sees the failure read into plain values and may claim it; None declines."""
    seen: list[tuple[int, str]] = []

    def claim(failure: HTTPFailure, model: str) -> BadRequest:
        seen.append((failure.status, model))
        return BadRequest("p", model, "claimed")

    with pytest.raises(BadRequest, match="claimed"):
        with map_sdk_errors(
            errors, provider="p", model="m", where="x", secret=KEY, on_status=claim
        ):
            raise raised
    with pytest.raises(ProviderAuthError):
        with map_sdk_errors(
            errors, provider="p", model="m", where="x", secret=KEY, on_status=lambda f, m: None
        ):
            raise raised
    assert seen == [(401, "m")]
