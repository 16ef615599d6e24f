"""FakeLLM itself: wire shapes judged by the real SDKs, cache emulation, strictness and helpers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from tests.fakes.llm import FakeLLM, ManualClock, ToolCallSpec, Turn

EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


def _anthropic(fake: FakeLLM, key: str = "k") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=key, base_url=fake.anthropic_base_url, max_retries=0, timeout=5
    )


def _openai(fake: FakeLLM, key: str = "k") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=key, base_url=fake.openai_base_url, max_retries=0, timeout=5)


def _system(text: str, marker: dict[str, str] | None = EPH) -> list[dict[str, Any]]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marker:
        block["cache_control"] = marker
    return [block]


async def _usage(
    client: anthropic.AsyncAnthropic, *, model: str = "m", system: Any, messages: Any
) -> dict[str, Any]:
    message = await client.messages.create(
        model=model, max_tokens=10, system=system, messages=messages
    )
    return message.usage.model_dump()


def _user(text: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marker:
        block["cache_control"] = marker
    return {"role": "user", "content": [block]}


async def test_stream_helpers_of_both_sdks_accept_the_wire(fake: FakeLLM) -> None:
    """The SDKs' own stream helpers parse the fake's SSE, tool calls included."""
    fake.script(
        Turn(text="Let me check.", tool_calls=[ToolCallSpec("get_weather", '{"city": "Paris"}')])
    )
    async with _anthropic(fake).messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"city": "Paris"}  # type: ignore[union-attr]
    fake.script(Turn(tool_calls=[ToolCallSpec("a", '{"x": 1}'), ToolCallSpec("b", '{"y": 2}')]))
    async with _openai(fake).chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "hi"}]
    ) as ostream:
        completion = await ostream.get_final_completion()
    calls = completion.choices[0].message.tool_calls or []
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        ("a", '{"x": 1}'),
        ("b", '{"y": 2}'),
    ]  # type: ignore[union-attr]
    assert completion.choices[0].finish_reason == "tool_calls"


async def test_anthropic_event_sequence_is_exact(fake: FakeLLM) -> None:
    """Streaming emits message_start, ping, block start/deltas/stop, message_delta, message_stop."""
    fake.script(Turn(text="a b", tool_calls=[ToolCallSpec("t", '{"k": "v"}')]))
    stream = await _anthropic(fake).messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}], stream=True
    )
    kinds = [event.type async for event in stream]
    assert kinds[:2] == ["message_start", "content_block_start"]  # the SDK drops ping
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2


async def test_cache_write_then_read(fake: FakeLLM) -> None:
    """The first request writes the marked prefix; the same prefix is then read."""
    client = _anthropic(fake)
    system = _system("s" * 4000)
    first = await _usage(client, system=system, messages=[_user("abcd")])
    second = await _usage(client, system=system, messages=[_user("efgh")])
    assert (
        first["cache_creation_input_tokens"],
        first["cache_read_input_tokens"],
        first["input_tokens"],
    ) == (1000, 0, 1)
    assert first["cache_creation"] == {
        "ephemeral_5m_input_tokens": 1000,
        "ephemeral_1h_input_tokens": 0,
    }
    assert (
        second["cache_creation_input_tokens"],
        second["cache_read_input_tokens"],
        second["input_tokens"],
    ) == (0, 1000, 1)


async def test_rolling_breakpoint_reads_the_longest_earlier_prefix(fake: FakeLLM) -> None:
    """A moved last breakpoint reads the earlier one's prefix and writes only the new part."""
    client = _anthropic(fake)
    system = _system("s" * 400)
    turn1 = [_user("u" * 40, EPH)]
    turn2 = [_user("u" * 40), {"role": "assistant", "content": "a" * 40}, _user("v" * 40, EPH)]
    first = await _usage(client, system=system, messages=turn1)
    second = await _usage(client, system=system, messages=turn2)
    assert first["cache_creation_input_tokens"] == 110
    assert (
        second["cache_read_input_tokens"],
        second["cache_creation_input_tokens"],
        second["input_tokens"],
    ) == (110, 20, 0)


async def test_ttl_expiry_on_the_fake_clock(fake: FakeLLM) -> None:
    """A 5m entry expires after 300 s, a read refreshes it, and a 1h entry outlives 5 minutes."""
    clock = ManualClock()
    fake.clock = clock
    client = _anthropic(fake)
    await _usage(client, system=_system("s" * 400), messages=[_user("q")])
    clock.advance(299)
    assert (await _usage(client, system=_system("s" * 400), messages=[_user("q")]))[
        "cache_read_input_tokens"
    ] == 100
    clock.advance(299)  # 598 s after the write, 299 s after the refreshing read
    assert (await _usage(client, system=_system("s" * 400), messages=[_user("q")]))[
        "cache_read_input_tokens"
    ] == 100
    clock.advance(301)
    expired = await _usage(client, system=_system("s" * 400), messages=[_user("q")])
    assert (expired["cache_read_input_tokens"], expired["cache_creation_input_tokens"]) == (0, 100)
    hour = await _usage(client, system=_system("h" * 400, EPH_1H), messages=[_user("q")])
    assert hour["cache_creation"] == {
        "ephemeral_5m_input_tokens": 0,
        "ephemeral_1h_input_tokens": 100,
    }
    clock.advance(3000)
    assert (await _usage(client, system=_system("h" * 400, EPH_1H), messages=[_user("q")]))[
        "cache_read_input_tokens"
    ] == 100


async def test_cache_is_scoped_to_model_and_key(fake: FakeLLM) -> None:
    """Another model or another API key starts cold."""
    system = _system("s" * 400)
    await _usage(_anthropic(fake), system=system, messages=[_user("q")])
    other_model = await _usage(_anthropic(fake), model="m2", system=system, messages=[_user("q")])
    other_key = await _usage(_anthropic(fake, key="k2"), system=system, messages=[_user("q")])
    assert other_model["cache_read_input_tokens"] == other_key["cache_read_input_tokens"] == 0


async def test_min_cache_tokens_and_unmarked_prompts() -> None:
    """Prefixes under min_cache_tokens are not cached; a prompt without markers is all input."""
    async with FakeLLM(min_cache_tokens=1024) as fake:
        client = _anthropic(fake)
        small = await _usage(client, system=_system("s" * 400), messages=[_user("q")])
        plain = await _usage(client, system="s" * 400, messages=[_user("q")])
    assert (small["cache_creation_input_tokens"], small["input_tokens"]) == (0, 101)
    assert (plain["cache_creation_input_tokens"], plain["input_tokens"]) == (0, 101)


@pytest.mark.parametrize(
    ("system", "messages", "fragment"),
    [
        (
            _system("s"),
            [_user("a", EPH), _user("b", EPH), _user("c", EPH), _user("d", EPH)],
            "maximum of 4",
        ),
        (_system("s", EPH), [_user("a", EPH_1H)], "ttl='1h'"),
        ("s", [{"role": "user", "content": [{"type": "text", "text": ""}]}], "non-empty"),
        (
            "s",
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
                },
                _user("x"),
            ],
            "tool_result",
        ),
    ],
)
async def test_anthropic_strictness(
    fake: FakeLLM, system: Any, messages: Any, fragment: str
) -> None:
    """Requests the real API rejects (5 markers, 1h after 5m, empty text, orphan tool_use) get a 400."""
    with pytest.raises(anthropic.BadRequestError, match=fragment):
        await _anthropic(fake).messages.create(
            model="m", max_tokens=5, system=system, messages=messages
        )


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([{"role": "user", "content": "x", "_id": 1}], "Additional properties"),
        ([{"role": "tool", "tool_call_id": "c", "content": "x"}], "must be a response"),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "x"},
            ],
            "must be followed by tool messages",
        ),
    ],
)
async def test_openai_strictness(fake: FakeLLM, messages: Any, fragment: str) -> None:
    """Metadata keys and unpaired tool messages get the 400 the real API gives."""
    with pytest.raises(openai.BadRequestError, match=fragment):
        await _openai(fake).chat.completions.create(model="m", messages=messages)


async def test_openai_usage_only_with_include_usage(fake: FakeLLM) -> None:
    """A stream carries usage only when asked, as a last chunk with no choices; cached tokens grow."""
    client = _openai(fake)
    plain = [
        c
        async for c in await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "abcd"}], stream=True
        )
    ]
    assert all(c.usage is None for c in plain)
    asked = [
        c
        async for c in await client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "abcd"},
                {"role": "assistant", "content": "x"},
                {"role": "user", "content": "efgh"},
            ],
            stream=True,
            stream_options={"include_usage": True},
        )
    ]
    assert asked[-1].choices == [] and asked[-1].usage is not None
    assert asked[-1].usage.prompt_tokens == 3
    assert asked[-1].usage.prompt_tokens_details.cached_tokens == 1  # type: ignore[union-attr]


async def test_auth_accepts_both_header_forms() -> None:
    """x-api-key and Authorization: Bearer are both accepted; a wrong key gets a 401."""
    async with FakeLLM(expected_key="good") as fake:
        async with httpx2.AsyncClient(base_url=fake.url, timeout=5) as http:
            body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
            by_header = await http.post("/v1/messages", json=body, headers={"x-api-key": "good"})
            by_bearer = await http.post(
                "/v1/messages", json=body, headers={"Authorization": "Bearer good"}
            )
            wrong = await http.post("/v1/messages", json=body, headers={"x-api-key": "bad"})
    assert (by_header.status_code, by_bearer.status_code, wrong.status_code) == (200, 200, 401)
    assert wrong.json()["error"]["type"] == "authentication_error"


async def test_errors_carry_retry_after_ms(fake: FakeLLM) -> None:
    """429 and 5xx answers carry retry-after-ms so clients retry fast."""
    fake.script(Turn(error=(503, "api_error", "down"), retry_after_ms=25))
    with pytest.raises(anthropic.InternalServerError) as caught:
        await _anthropic(fake).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.response.headers["retry-after-ms"] == "25"


async def test_responder_script_and_echo_order(fake: FakeLLM) -> None:
    """The responder answers first when it wants to, then the script, then the echo."""

    def responder(body: dict[str, Any], api: str) -> Turn | None:
        text = str(body["messages"][-1]["content"])
        return Turn(text=f"summary via {api}") if text.startswith("SUMMARIZE") else None

    fake.responder = responder
    fake.script(Turn(text="scripted"))
    client = _openai(fake)

    async def ask(text: str) -> str | None:
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": text}]
        )
        return reply.choices[0].message.content

    assert await ask("SUMMARIZE this") == "summary via openai"
    assert await ask("hello") == "scripted"
    assert await ask("again") == "echo: again"
    fake.assert_complete()
    assert len(await fake.wait_requests(3, timeout=1)) == 3


async def test_assert_complete_reports_unused_turns(fake: FakeLLM) -> None:
    """A scripted turn nobody asked for fails assert_complete."""
    fake.script(Turn(text="never sent"))
    with pytest.raises(AssertionError, match="1 scripted turn"):
        fake.assert_complete()


async def test_wait_requests_times_out(fake: FakeLLM) -> None:
    """Waiting for more requests than arrive ends with TimeoutError, not a hang."""
    with pytest.raises(TimeoutError):
        await fake.wait_requests(1, timeout=0.05)


async def test_count_tokens_endpoint(fake: FakeLLM) -> None:
    """messages.count_tokens answers with the same chars/4 arithmetic."""
    counted = await _anthropic(fake).messages.count_tokens(
        model="m", system="s" * 40, messages=[{"role": "user", "content": "abcd"}]
    )
    assert counted.input_tokens == 11


async def test_stall_after_events_sends_exactly_that_many(fake: FakeLLM) -> None:
    """`stall_after_events=3` sends message_start, ping, content_block_start, then goes silent."""
    fake.script(Turn(text="never finished", stall_after_events=3))
    seen: list[str] = []
    stream = await _anthropic(fake).messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3), stream:
            async for event in stream:
                seen.append(event.type)
    assert seen == ["message_start", "content_block_start"]  # the SDK drops ping


async def test_event_delay_paces_a_stream_that_still_completes(fake: FakeLLM) -> None:
    """`event_delay_s` slows every chunk but the stream ends normally, with all its text."""
    fake.script(Turn(text="one two three", event_delay_s=0.02))
    loop = asyncio.get_running_loop()
    started = loop.time()
    stream = await _openai(fake).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(pieces) == "one two three"
    assert loop.time() - started >= 0.02 * len(pieces)
