"""A reply that is not a finished one, on every wire, with the real SDKs against FakeLLM.

Contracts: OpenAI "The chat completion object" (`choices[].message` and `finish_reason` are
required; a stream's last chunk carries `finish_reason`); Anthropic Messages streaming
(`message_delta` carries `stop_reason` before `message_stop`); OpenAI Responses streaming (a
stream ends with `response.completed`, `response.incomplete` or `response.failed`). A stream cut
before those, or a 200 whose body is not a response, is `ReplyCut`: retried once (however many
retries `max_retries` allows), then raised carrying the text that did arrive.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.errors import ReplyCut
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import Provider, ProviderRequest, ProviderSettings
from agent.providers.openai_chat import OpenAIChatProvider
from agent.providers.openai_responses import OpenAIResponsesProvider
from sim.llm_server import FakeLLM, Turn
from tests.agent.providers.conftest import RecordingSleep

TEXT = "one two three four five six seven eight"
Build = Callable[[FakeLLM, RecordingSleep], Provider]


def _settings(fake: FakeLLM, provider: str, **extra: object) -> ProviderSettings:
    base = fake.url if provider == "anthropic" else fake.openai_base_url
    return ProviderSettings(
        provider=provider, model="m", base_url=base, api_key="k", max_retries=3, **extra
    )  # type: ignore[arg-type]


def _chat(fake: FakeLLM, sleeps: RecordingSleep) -> Provider:
    return OpenAIChatProvider(_settings(fake, "openai"), accepts_cache_control=False, sleep=sleeps)


def _anthropic(fake: FakeLLM, sleeps: RecordingSleep) -> Provider:
    return AnthropicProvider(_settings(fake, "anthropic"), sleep=sleeps)


def _responses(fake: FakeLLM, sleeps: RecordingSleep) -> Provider:
    return OpenAIResponsesProvider(_settings(fake, "openai", api_mode="responses"), sleep=sleeps)


WIRES: dict[str, Build] = {"chat": _chat, "anthropic": _anthropic, "responses": _responses}
REQUEST = ProviderRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=64)


async def _complete(provider: Provider, *, stream: bool) -> object:
    shown: list[str] = []

    async def on_text(delta: str) -> None:
        shown.append(delta)

    try:
        return await provider.complete(REQUEST, on_text=on_text if stream else None)
    finally:
        await provider.aclose()  # type: ignore[attr-defined]


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_a_stream_cut_before_its_end_is_reply_cut_after_one_retry(
    fake: FakeLLM, sleeps: RecordingSleep, wire: str
) -> None:
    """Cut before the first text, twice: two requests (not four), then `ReplyCut`."""
    fake.script(*[Turn(text=TEXT, cut_after_events=1)] * 4)
    with pytest.raises(ReplyCut):
        await _complete(WIRES[wire](fake, sleeps), stream=True)
    assert len(fake.requests) == 2


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_a_cut_stream_then_a_whole_one_answers(
    fake: FakeLLM, sleeps: RecordingSleep, wire: str
) -> None:
    """One cut before any text, then a whole reply: answered, from two requests."""
    fake.script(Turn(text=TEXT, cut_after_events=1), Turn(text="whole"))
    reply = await _complete(WIRES[wire](fake, sleeps), stream=True)
    assert reply.message["content"] == "whole"  # type: ignore[attr-defined]


@pytest.mark.parametrize("wire", sorted(WIRES))
@pytest.mark.parametrize(
    "body",
    [("<html>502 Bad Gateway</html>", "text/html"), ('{"id": "x", "cho', "application/json")],
    ids=["html", "broken_json"],
)
async def test_a_body_that_is_not_a_response_is_reply_cut(
    fake: FakeLLM, sleeps: RecordingSleep, wire: str, body: tuple[str, str]
) -> None:
    """A 200 with an HTML page or broken JSON, twice: `ReplyCut` after one retry, never an
    empty successful reply."""
    text, content_type = body
    fake.script(*[Turn(raw_body=text, raw_content_type=content_type)] * 4)
    with pytest.raises(ReplyCut):
        await _complete(WIRES[wire](fake, sleeps), stream=False)
    assert len(fake.requests) == 2


async def test_the_partial_text_travels_with_the_error(
    fake: FakeLLM, sleeps: RecordingSleep
) -> None:
    """Cut after some words reached the caller: no retry (they would be shown twice), and the
    error carries those words for the failure mark."""
    fake.script(Turn(text=TEXT, cut_after_events=3))
    with pytest.raises(ReplyCut) as caught:
        await _complete(_chat(fake, sleeps), stream=True)
    assert len(fake.requests) == 1
    assert caught.value.partial == "one two "
