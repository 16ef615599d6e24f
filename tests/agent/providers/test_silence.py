"""Patience with slow local servers: judged by silence, not total time (issue 33).

The real openai SDK against FakeLLM on a custom (local) route. Issue 33 saw llama.cpp, prefilling
at 1-2 tokens/s, hit `model.timeout_s` (120 s) 15 times and every retry queue behind the request
it abandoned. Scaled down with the ratios kept (a token every 2 s for 200 s against a 120 s
limit becomes a token every 0.02 s for 2 s against 1.2 s): a slow stream is waited for without
a retry however long it takes; a stream silent past the limit is cancelled (its connection
closed, which the server sees before the retry arrives) and retried once.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import structlog

from agent.errors import ProviderSilent
from agent.providers.base import ProviderRequest, ProviderSettings
from agent.providers.openai_chat import OpenAIChatProvider
from sim.llm_server import FakeLLM, Turn
from tests.agent.providers.conftest import RecordingSleep

SILENCE_S = 1.2
TOKEN_EVERY_S = SILENCE_S / 60  # 2 s against 120 s
SLOW_TEXT = " ".join(f"t{i}" for i in range(100))  # 100 tokens: 2 s, past the silence limit


def _provider(fake: FakeLLM, sleeps: RecordingSleep | None = None) -> OpenAIChatProvider:
    """`sleeps` None: the real backoff pause (the server sees the hang-up within it)."""
    settings = ProviderSettings(
        provider="custom",
        model="local",
        base_url=fake.openai_base_url,
        timeout_s=SILENCE_S,
        max_retries=3,
    )
    if sleeps is None:
        return OpenAIChatProvider(settings, accepts_cache_control=False)
    return OpenAIChatProvider(settings, accepts_cache_control=False, sleep=sleeps)


REQUEST = ProviderRequest(
    model="local", messages=[{"role": "user", "content": "go slowly"}], max_tokens=512
)


async def test_a_slow_stream_is_waited_for_without_a_retry(
    fake: FakeLLM, sleeps: RecordingSleep
) -> None:
    """A token every 1/60 of the silence limit for 5/3 of it: one request, the whole reply,
    even for a caller that does not stream (a custom server is always streamed)."""
    fake.script(Turn(text=SLOW_TEXT, event_delay_s=TOKEN_EVERY_S))
    provider = _provider(fake, sleeps)
    started = time.monotonic()
    try:
        reply = await provider.complete(REQUEST)
    finally:
        await provider.aclose()
    assert time.monotonic() - started > SILENCE_S  # longer than the limit, in total
    assert reply.message["content"] == SLOW_TEXT
    assert len(fake.requests) == 1 and sleeps.delays == []


async def test_a_silent_stream_is_cancelled_then_retried_once(fake: FakeLLM) -> None:
    """Silent after its first event: cancelled at the silence limit (the server sees the
    hang-up before the retry arrives), retried once, answered; one log line says why."""
    fake.script(Turn(text="never finished", stall_after_events=1), Turn(text="fine now"))
    provider = _provider(fake)
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        try:
            reply = await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    assert reply.message["content"] == "fine now"
    assert SILENCE_S <= time.monotonic() - started
    assert fake.timeline == ["request", "abandoned", "request"]
    retried = [e for e in logs if e["event"] == "provider_call_retried"]
    assert len(retried) == 1 and "no byte for 1.2 s" in retried[0]["why"]


async def test_a_server_silent_twice_fails_after_one_retry(fake: FakeLLM) -> None:
    """Silent before its first byte of body, twice: `ProviderSilent` after two requests,
    although `max_retries` allows three, and both were cancelled."""
    fake.script(*[Turn(text="x", stall_after_events=0)] * 3)
    provider = _provider(fake)
    with pytest.raises(ProviderSilent, match="silence_timeout_s"):
        try:
            await provider.complete(REQUEST)
        finally:
            await provider.aclose()
    async with asyncio.timeout(5):  # the fake notices the last hang-up within its 20 ms poll
        while len(fake.timeline) < 4:  # noqa: ASYNC110 (the fake records it from a poll)
            await asyncio.sleep(0.01)
    assert fake.timeline == ["request", "abandoned", "request", "abandoned"]
