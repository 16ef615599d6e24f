"""AnthropicProvider with the real anthropic SDK against FakeLLM on loopback."""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import (
    BadRequest,
    ContextTooLong,
    ProviderAuthError,
    ProviderUnavailable,
    RateLimited,
)
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import ProviderRequest, ProviderSettings, ToolSpec, Usage
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.agent.providers.conftest import RecordingSleep

KEY = "sk-ant-test-key"
WEATHER = ToolSpec(
    name="get_weather", description="Weather for a city", parameters={"type": "object"}
)


def _provider(url: str, sleeps: RecordingSleep, **overrides: object) -> AnthropicProvider:
    fields: dict[str, Any] = {
        "provider": "anthropic",
        "model": "fake-claude",
        "base_url": url,
        "api_key": KEY,
        "timeout_s": 5.0,
        "max_retries": 2,
    }
    fields.update(overrides)
    return AnthropicProvider(ProviderSettings(**fields), sleep=sleeps)


def _request(*messages: Any, **extra: Any) -> ProviderRequest:
    return ProviderRequest(model="fake-claude", messages=list(messages), max_tokens=100, **extra)  # type: ignore[arg-type]


async def test_text_reply(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """A plain call returns the assistant text, exact usage and an `end` stop."""
    provider = _provider(fake.anthropic_base_url, sleeps)
    reply = await provider.complete(
        _request({"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"})
    )
    await provider.aclose()
    assert reply.message == {"role": "assistant", "content": "echo: hello"}
    assert reply.usage == Usage(input_tokens=2 + 2, output_tokens=3)
    assert reply.stop_reason == "end"
    sent = fake.requests[0].json
    assert sent is not None and sent["system"] == "be brief" and "stream" not in sent


async def test_streamed_reply_delivers_deltas_in_order(
    fake: FakeLLM, sleeps: RecordingSleep
) -> None:
    """With on_text, every text delta arrives in order and the joined text is the reply."""
    fake.script(Turn(text="The quick brown fox jumps"))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    provider = _provider(fake.anthropic_base_url, sleeps)
    reply = await provider.complete(_request({"role": "user", "content": "go"}), on_text=on_text)
    await provider.aclose()
    assert deltas == ["The ", "quick ", "brown ", "fox ", "jumps"]
    assert reply.message["content"] == "The quick brown fox jumps"
    assert reply.usage.output_tokens == 7
    assert fake.requests[0].json is not None and fake.requests[0].json["stream"] is True


@pytest.mark.parametrize("streamed", [False, True])
async def test_tool_round_trip(fake: FakeLLM, sleeps: RecordingSleep, streamed: bool) -> None:
    """tool_use comes back as OpenAI-style tool_calls, and the results go out as tool_result blocks."""
    fake.script(
        Turn(text="Checking.", tool_calls=[ToolCallSpec("get_weather", '{"city": "Paris"}')]),
        Turn(text="Sunny."),
    )
    provider = _provider(fake.anthropic_base_url, sleeps)

    async def ignore(_: str) -> None:
        return None

    on_text = ignore if streamed else None
    history: list[dict[str, object]] = [{"role": "user", "content": "weather?"}]
    first = await provider.complete(_request(*history, tools=(WEATHER,)), on_text=on_text)
    calls = first.message["tool_calls"]
    assert first.stop_reason == "tool_use"
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("get_weather", '{"city":"Paris"}')
    ]
    history += [
        dict(first.message),
        {"role": "tool", "tool_call_id": calls[0]["id"], "name": "get_weather", "content": "18C"},
    ]
    second = await provider.complete(_request(*history, tools=(WEATHER,)), on_text=on_text)
    await provider.aclose()
    assert second.message["content"] == "Sunny."
    wire = fake.requests[1].json
    assert wire is not None
    assert wire["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": {"type": "object"},
        }
    ]
    assert wire["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": calls[0]["id"],
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert wire["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": calls[0]["id"], "content": "18C"}],
    }


async def test_usage_maps_cache_write_then_read(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """A cached system prompt is written on the first call and read on the second."""
    system = {
        "role": "system",
        "content": [{"type": "text", "text": "s" * 4000, "cache_control": {"type": "ephemeral"}}],
    }
    provider = _provider(fake.anthropic_base_url, sleeps)
    first = await provider.complete(_request(system, {"role": "user", "content": "abcd"}))
    second = await provider.complete(_request(system, {"role": "user", "content": "efgh"}))
    await provider.aclose()
    assert first.usage == Usage(input_tokens=1, output_tokens=3, cache_write_tokens=1000)
    assert second.usage == Usage(input_tokens=1, output_tokens=3, cache_read_tokens=1000)
    assert second.usage.prompt_tokens == 1001


async def test_wrong_key_is_an_auth_error_without_the_key() -> None:
    """A 401 becomes ProviderAuthError whose message never contains the key."""
    async with FakeLLM(expected_key="the-right-key") as fake:
        provider = _provider(fake.anthropic_base_url, RecordingSleep())
        with pytest.raises(ProviderAuthError) as caught:
            await provider.complete(_request({"role": "user", "content": "hi"}))
        await provider.aclose()
    assert KEY not in str(caught.value)
    assert "HTTP 401" in str(caught.value)
    assert len(fake.requests) == 1
    assert (
        fake.requests[0].headers.get("authorization") == f"Bearer {KEY}"
        or fake.requests[0].headers.get("x-api-key") == KEY
    )


async def test_rate_limit_then_success_honours_retry_after(
    fake: FakeLLM, sleeps: RecordingSleep
) -> None:
    """A 429 is retried after the server's retry-after-ms; the second attempt succeeds."""
    fake.script(
        Turn(error=(429, "rate_limit_error", "slow down"), retry_after_ms=10), Turn(text="done")
    )
    provider = _provider(fake.anthropic_base_url, sleeps)
    reply = await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert reply.message["content"] == "done"
    assert sleeps.delays == [0.01]
    assert len(fake.requests) == 2
    fake.assert_complete()


async def test_server_error_storm_is_bounded(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """Repeated 5xx/529 are retried max_retries times, then ProviderUnavailable reaches the caller."""
    fake.script(
        *[Turn(error=(529, "overloaded_error", "Overloaded")) for _ in range(3)],
        Turn(text="unused"),
    )
    provider = _provider(fake.anthropic_base_url, sleeps, max_retries=2)
    with pytest.raises(ProviderUnavailable, match="Overloaded"):
        await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert len(fake.requests) == 3
    assert sleeps.delays == [0.01, 0.01]


async def test_context_too_long_is_not_retried(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """A 400 'prompt is too long' becomes ContextTooLong after exactly one request."""
    fake.script(
        Turn(
            error=(
                400,
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            )
        )
    )
    provider = _provider(fake.anthropic_base_url, sleeps)
    with pytest.raises(ContextTooLong):
        await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert len(fake.requests) == 1


async def test_other_bad_request(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """A request the fake (like the real API) rejects as malformed becomes BadRequest."""
    provider = _provider(fake.anthropic_base_url, sleeps)
    orphan = {"role": "tool", "tool_call_id": "nope", "content": "x"}
    with pytest.raises(BadRequest, match="tool_use_id"):
        await provider.complete(
            _request(
                {"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"}, orphan
            )
        )
    await provider.aclose()


async def test_connection_refused_is_unavailable(
    closed_port_url: str, sleeps: RecordingSleep
) -> None:
    """Nothing listening: bounded retries, then ProviderUnavailable naming the endpoint."""
    provider = _provider(closed_port_url, sleeps, max_retries=1)
    with pytest.raises(ProviderUnavailable, match="cannot reach"):
        await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert len(sleeps.delays) == 1


async def test_slow_server_times_out(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """A reply slower than timeout_s becomes ProviderUnavailable instead of hanging."""
    fake.script(Turn(text="late", delay_s=2.0))
    provider = _provider(fake.anthropic_base_url, sleeps, timeout_s=0.2, max_retries=0)
    with pytest.raises(ProviderUnavailable):
        await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()


async def test_streamed_call_retries_before_any_text(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """An error before the stream starts is retried; the user sees the text once."""
    fake.script(Turn(error=(500, "api_error", "boom")), Turn(text="one two"))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    provider = _provider(fake.anthropic_base_url, sleeps)
    reply = await provider.complete(_request({"role": "user", "content": "hi"}), on_text=on_text)
    await provider.aclose()
    assert "".join(deltas) == reply.message["content"] == "one two"
    assert len(fake.requests) == 2


async def test_extra_reaches_the_wire(fake: FakeLLM, sleeps: RecordingSleep) -> None:
    """ProviderRequest.extra is merged into the create() call."""
    provider = _provider(fake.anthropic_base_url, sleeps)
    await provider.complete(
        _request({"role": "user", "content": "hi"}, extra={"metadata": {"user_id": "u1"}})
    )
    await provider.aclose()
    assert fake.requests[0].json is not None and fake.requests[0].json["metadata"] == {
        "user_id": "u1"
    }


async def test_rate_limited_without_retries_carries_retry_after(
    fake: FakeLLM, sleeps: RecordingSleep
) -> None:
    """With retries off, the RateLimited error carries the server's pause."""
    fake.script(Turn(error=(429, "rate_limit_error", "slow"), retry_after_ms=1500))
    provider = _provider(fake.anthropic_base_url, sleeps, max_retries=0)
    with pytest.raises(RateLimited) as caught:
        await provider.complete(_request({"role": "user", "content": "hi"}))
    await provider.aclose()
    assert caught.value.retry_after_s == 1.5
