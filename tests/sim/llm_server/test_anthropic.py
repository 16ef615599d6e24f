"""The Anthropic Messages wire of FakeLLM, judged by the real anthropic SDK: stream, cache, refusals."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from sim.llm_server import FakeLLM, ManualClock, ToolCallSpec, Turn
from tests.sim.llm_server.clients import ANTHROPIC_VERSION, anthropic_client

EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}


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


async def test_anthropic_event_sequence_is_exact(fake: FakeLLM) -> None:
    """Streaming emits message_start, ping, block start/deltas/stop, message_delta, message_stop."""
    fake.script(Turn(text="a b", tool_calls=[ToolCallSpec("t", '{"k": "v"}')]))
    stream = await anthropic_client(fake).messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}], stream=True
    )
    kinds = [event.type async for event in stream]
    assert kinds[:2] == ["message_start", "content_block_start"]  # the SDK drops ping
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2


async def test_cache_write_then_read(fake: FakeLLM) -> None:
    """The first request writes the marked prefix; the same prefix is then read."""
    client = anthropic_client(fake)
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
    client = anthropic_client(fake)
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
    client = anthropic_client(fake)
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
    await _usage(anthropic_client(fake), system=system, messages=[_user("q")])
    other_model = await _usage(
        anthropic_client(fake), model="m2", system=system, messages=[_user("q")]
    )
    other_key = await _usage(anthropic_client(fake, key="k2"), system=system, messages=[_user("q")])
    assert other_model["cache_read_input_tokens"] == other_key["cache_read_input_tokens"] == 0


async def test_min_cache_tokens_and_unmarked_prompts() -> None:
    """Prefixes under min_cache_tokens are not cached; a prompt without markers is all input."""
    async with FakeLLM(min_cache_tokens=1024) as fake:
        client = anthropic_client(fake)
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
        await anthropic_client(fake).messages.create(
            model="m", max_tokens=5, system=system, messages=messages
        )


async def test_count_tokens_endpoint(fake: FakeLLM) -> None:
    """messages.count_tokens answers with the same chars/4 arithmetic."""
    counted = await anthropic_client(fake).messages.count_tokens(
        model="m", system="s" * 40, messages=[{"role": "user", "content": "abcd"}]
    )
    assert counted.input_tokens == 11


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "first"},
                            {"type": "tool_result", "tool_use_id": "t", "content": "r"},
                        ],
                    },
                ],
            },
            "must come first",
        ),
        ({"model": "m", "max_tokens": 0, "messages": [_user("q")]}, "greater than or equal to 1"),
        ({"model": "m", "max_tokens": True, "messages": [_user("q")]}, "valid integer"),
        ({"model": "m", "max_tokens": 5, "messages": ["hi"]}, "valid dictionary"),
        (
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": ["hi"]}]},
            "content block",
        ),
        (
            {"model": "m", "max_tokens": 5, "messages": [_user("q")], "tools": [{"name": "f"}]},
            "input_schema",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "name": "n", "input": {}}],
                    }
                ],
            },
            "id and name are required",
        ),
        ({"model": "m", "max_tokens": 5, "messages": [_user("q")], "system": 7}, "system"),
        (
            {"model": "m", "max_tokens": 5, "messages": [_user("q")], "cache_control": "ephemeral"},
            "invalid marker",
        ),
    ],
)
async def test_malformed_requests_get_the_real_400(
    fake: FakeLLM, body: dict[str, Any], fragment: str
) -> None:
    """Shapes the Messages API refuses get a 400 envelope, never a crash (docs.anthropic.com/en/api/messages, .../docs/agents-and-tools/tool-use/implement-tool-use: tool_result blocks come first)."""
    fake.script(Turn(text="kept"))
    async with httpx2.AsyncClient(base_url=fake.url, timeout=5) as http:
        answer = await http.post(
            "/v1/messages", json=body, headers={"x-api-key": "k", **ANTHROPIC_VERSION}
        )
    assert answer.status_code == 400
    envelope = answer.json()
    assert (envelope["type"], envelope["error"]["type"]) == ("error", "invalid_request_error")
    assert fragment in envelope["error"]["message"]
    assert envelope["request_id"] == answer.headers["request-id"]
    reply = await anthropic_client(fake).messages.create(
        model="m", max_tokens=5, messages=[_user("q")]
    )
    assert reply.content[0].text == "kept"  # type: ignore[union-attr]  # the 400 took no turn


async def test_anthropic_version_header_is_required(fake: FakeLLM) -> None:
    """Without `anthropic-version` the API answers 400 (docs.anthropic.com/en/api/versioning)."""
    body = {"model": "m", "max_tokens": 5, "messages": [_user("q")]}
    async with httpx2.AsyncClient(base_url=fake.url, timeout=5) as http:
        bare = await http.post("/v1/messages", json=body, headers={"x-api-key": "k"})
        versioned = await http.post(
            "/v1/messages", json=body, headers={"x-api-key": "k", **ANTHROPIC_VERSION}
        )
    assert bare.status_code == 400
    assert bare.json()["error"] == {
        "type": "invalid_request_error",
        "message": "anthropic-version: header is required",
    }
    assert versioned.status_code == 200


async def test_count_tokens_refuses_what_messages_refuses(fake: FakeLLM) -> None:
    """count_tokens validates like messages, minus max_tokens (docs.anthropic.com/en/api/messages-count-tokens)."""
    with pytest.raises(anthropic.BadRequestError, match="non-empty"):
        await anthropic_client(fake).messages.count_tokens(
            model="m", messages=[{"role": "user", "content": [{"type": "text", "text": ""}]}]
        )
