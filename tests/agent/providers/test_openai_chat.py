"""OpenAIChatProvider with the real openai SDK against FakeLLM: openai, openrouter and custom routes."""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import ContextTooLong, ProviderAuthError, ProviderUnavailable
from agent.providers.base import ProviderRequest, ProviderSettings, ToolSpec, Usage
from agent.providers.openai_chat import PLACEHOLDER_API_KEY, OpenAIChatProvider
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.agent.providers.conftest import RecordingSleep

KEY = "sk-openai-test-key"
EPH = {"type": "ephemeral"}
LOOKUP = ToolSpec(name="lookup", description="Look something up", parameters={"type": "object"})


def _provider(
    url: str,
    sleeps: RecordingSleep,
    *,
    provider: str = "openai",
    accepts: bool = False,
    **overrides: object,
) -> OpenAIChatProvider:
    fields: dict[str, Any] = {
        "provider": provider,
        "model": "fake-gpt",
        "base_url": url,
        "api_key": KEY,
        "timeout_s": 5.0,
        "max_retries": 2,
    }
    fields.update(overrides)
    return OpenAIChatProvider(
        ProviderSettings(**fields), accepts_cache_control=accepts, sleep=sleeps
    )


def _request(*messages: Any, **extra: Any) -> ProviderRequest:
    return ProviderRequest(model="fake-gpt", messages=list(messages), max_tokens=64, **extra)  # type: ignore[arg-type]


async def test_text_reply_and_wire_shape(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """A plain call returns the text and usage; metadata never reaches the wire."""
    provider = _provider(fake.openai_base_url, sleeps)
    reply = await provider.complete(
        _request({"role": "user", "content": "hello", "_id": 7, "_persisted": True})
    )
    await provider.aclose()
    assert reply.message == {"role": "assistant", "content": "echo: hello"}
    assert reply.usage == Usage(input_tokens=2, output_tokens=3)
    wire = fake.requests[0].json
    assert wire is not None
    assert wire["messages"] == [{"role": "user", "content": "hello"}]
    assert wire["max_completion_tokens"] == 64
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_streamed_reply_with_usage(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """Streaming asks for include_usage, delivers deltas in order and still reports usage."""
    fake.script(Turn(text="alpha beta gamma"))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    provider = _provider(fake.openai_base_url, sleeps)
    reply = await provider.complete(_request({"role": "user", "content": "go"}), on_text=on_text)
    await provider.aclose()
    assert deltas == ["alpha ", "beta ", "gamma"]
    assert reply.message["content"] == "alpha beta gamma"
    assert reply.usage == Usage(input_tokens=1, output_tokens=4)
    wire = fake.requests[0].json
    assert wire is not None and wire["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("streamed", [False, True])
async def test_tool_round_trip(fake: FakeLLM, sleeps: RecordingSleep, streamed: bool) -> None:
    """Two streamed tool calls are joined by index; their results go back as tool messages."""
    fake.script(
        Turn(
            tool_calls=[
                ToolCallSpec("lookup", '{"q": "Oslo weather"}'),
                ToolCallSpec("lookup", '{"q": "Rome"}'),
            ]
        ),
        Turn(text="Both found."),
    )

    async def ignore(_: str) -> None:
        return None

    provider = _provider(fake.openai_base_url, sleeps)
    history: list[dict[str, object]] = [{"role": "user", "content": "compare"}]
    first = await provider.complete(
        _request(*history, tools=(LOOKUP,)), on_text=ignore if streamed else None
    )
    calls = first.message["tool_calls"]
    assert first.stop_reason == "tool_use" and first.message["content"] is None
    assert [c["function"]["arguments"] for c in calls] == ['{"q": "Oslo weather"}', '{"q": "Rome"}']
    history.append(dict(first.message))
    history += [
        {"role": "tool", "tool_call_id": c["id"], "name": "lookup", "content": "ok"} for c in calls
    ]
    second = await provider.complete(
        _request(*history, tools=(LOOKUP,)), on_text=ignore if streamed else None
    )
    await provider.aclose()
    assert second.message["content"] == "Both found."
    wire = fake.requests[1].json
    assert wire is not None
    assert wire["messages"][2] == {"role": "tool", "tool_call_id": calls[0]["id"], "content": "ok"}
    assert wire["tools"][0]["function"]["name"] == "lookup"


async def test_invalid_tool_arguments_pass_through(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """Malformed arguments from the model reach the agent untouched, for it to answer."""
    fake.script(Turn(tool_calls=[ToolCallSpec("lookup", '{"q": ')]))
    provider = _provider(fake.openai_base_url, sleeps)
    reply = await provider.complete(_request({"role": "user", "content": "x"}, tools=(LOOKUP,)))
    await provider.aclose()
    assert reply.message["tool_calls"][0]["function"]["arguments"] == '{"q": '


async def test_cached_tokens_are_split_out(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """The second call of a growing conversation reads the first one's prefix from cache."""
    provider = _provider(fake.openai_base_url, sleeps)
    system = {"role": "system", "content": "p" * 400}
    await provider.complete(_request(system, {"role": "user", "content": "abcd"}))
    second = await provider.complete(
        _request(
            system,
            {"role": "user", "content": "abcd"},
            {"role": "assistant", "content": "wxyz"},
            {"role": "user", "content": "more"},
        )
    )
    await provider.aclose()
    assert second.usage == Usage(input_tokens=2, output_tokens=3, cache_read_tokens=101)


async def test_openrouter_keeps_cache_markers(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """On a route that accepts cache_control, message-level markers land on the last content block."""
    provider = _provider(fake.openai_base_url, sleeps, provider="openrouter", accepts=True)
    await provider.complete(
        _request(
            {"role": "system", "content": "sys", "cache_control": EPH},
            {"role": "user", "content": "hi"},
        )
    )
    await provider.aclose()
    wire = fake.requests[0].json
    assert wire is not None
    assert wire["messages"][0] == {
        "role": "system",
        "content": [{"type": "text", "text": "sys", "cache_control": EPH}],
    }
    assert wire["max_tokens"] == 64


async def test_plain_openai_drops_cache_markers(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """On OpenAI itself every cache marker is removed."""
    provider = _provider(fake.openai_base_url, sleeps)
    message = {
        "role": "user",
        "content": [{"type": "text", "text": "hi", "cache_control": EPH}],
        "cache_control": EPH,
    }
    await provider.complete(_request(message))
    await provider.aclose()
    wire = fake.requests[0].json
    assert wire is not None and wire["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]


async def test_custom_endpoint_without_key_sends_placeholder(
    fake: FakeLLM, sleeps: RecordingSleep
) -> None:
    """A local server without a key still gets a bearer header, never a real key."""
    provider = _provider(fake.openai_base_url, sleeps, provider="custom", api_key=None)
    reply = await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert reply.message["content"] == "echo: hi"
    assert fake.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"
    assert fake.requests[0].json is not None and "max_tokens" in fake.requests[0].json


async def test_wrong_key_is_an_auth_error() -> None:
    """A 401 becomes ProviderAuthError naming the provider and not the key."""
    async with FakeLLM(expected_key="right") as fake:
        provider = _provider(fake.openai_base_url, RecordingSleep())
        with pytest.raises(ProviderAuthError, match="openai") as caught:
            await provider.complete(_request({"role": "user", "content": "hi"}))
        await provider.aclose()
    assert KEY not in str(caught.value)


async def test_rate_limit_then_success(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """A 429 is retried after retry-after-ms and the next attempt succeeds."""
    fake.script(Turn(error=(429, "rate_limit_exceeded", "Rate limit reached")), Turn(text="ok"))
    provider = _provider(fake.openai_base_url, sleeps)
    reply = await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert reply.message["content"] == "ok"
    assert sleeps.delays == [0.01]


async def test_server_error_storm_is_bounded(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """Five 500s with max_retries=2: three requests, then ProviderUnavailable."""
    fake.script(*[Turn(error=(500, "server_error", "internal")) for _ in range(5)])
    provider = _provider(fake.openai_base_url, sleeps)
    with pytest.raises(ProviderUnavailable):
        await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert len(fake.requests) == 3


async def test_context_length_exceeded(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """OpenAI's context-length 400 becomes ContextTooLong."""
    message = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."
    fake.script(Turn(error=(400, "invalid_request_error", message)))
    provider = _provider(fake.openai_base_url, sleeps)
    with pytest.raises(ContextTooLong):
        await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()


async def test_connection_refused_is_unavailable(
    closed_port_url: str, sleeps: RecordingSleep
) -> None:
    """Nothing listening at base_url: ProviderUnavailable after the bounded retries."""
    provider = _provider(closed_port_url + "/v1", sleeps, max_retries=1)
    with pytest.raises(ProviderUnavailable, match="cannot reach"):
        await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert len(sleeps.delays) == 1
