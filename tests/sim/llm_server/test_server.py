"""FakeLLM's shared plumbing: scripting, the echo, the request log, keys, bodies, retry hints."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from sim.llm_server._http import COARSE_DELTAS, WORD_DELTAS_UP_TO, split_deltas
from tests.sim.llm_server.clients import ANTHROPIC_VERSION, anthropic_client, openai_client


async def test_stream_helpers_of_both_sdks_accept_the_wire(fake: FakeLLM) -> None:
    """The SDKs' own stream helpers parse the fake's SSE, tool calls included."""
    fake.script(
        Turn(text="Let me check.", tool_calls=[ToolCallSpec("get_weather", '{"city": "Paris"}')])
    )
    async with anthropic_client(fake).messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"city": "Paris"}  # type: ignore[union-attr]
    fake.script(Turn(tool_calls=[ToolCallSpec("a", '{"x": 1}'), ToolCallSpec("b", '{"y": 2}')]))
    async with openai_client(fake).chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "hi"}]
    ) as ostream:
        completion = await ostream.get_final_completion()
    calls = completion.choices[0].message.tool_calls or []
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        ("a", '{"x": 1}'),
        ("b", '{"y": 2}'),
    ]  # type: ignore[union-attr]
    assert completion.choices[0].finish_reason == "tool_calls"


async def test_auth_accepts_both_header_forms() -> None:
    """x-api-key and Authorization: Bearer are both accepted; a wrong key gets a 401."""
    async with FakeLLM(expected_key="good") as fake:
        async with httpx2.AsyncClient(base_url=fake.url, timeout=5) as http:
            body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
            by_header = await http.post(
                "/v1/messages", json=body, headers={"x-api-key": "good", **ANTHROPIC_VERSION}
            )
            by_bearer = await http.post(
                "/v1/messages",
                json=body,
                headers={"Authorization": "Bearer good", **ANTHROPIC_VERSION},
            )
            wrong = await http.post(
                "/v1/messages", json=body, headers={"x-api-key": "bad", **ANTHROPIC_VERSION}
            )
    assert (by_header.status_code, by_bearer.status_code, wrong.status_code) == (200, 200, 401)
    assert wrong.json()["error"]["type"] == "authentication_error"


async def test_errors_carry_retry_after_ms(fake: FakeLLM) -> None:
    """429 and 5xx answers carry retry-after-ms so clients retry fast."""
    fake.script(Turn(error=(503, "api_error", "down"), retry_after_ms=25))
    with pytest.raises(anthropic.InternalServerError) as caught:
        await anthropic_client(fake).messages.create(
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
    client = openai_client(fake)

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


async def test_latency_is_added_and_accounted_apart() -> None:
    """Each reply waits latency_s; busy time includes it and latency_total_s reports it alone."""
    async with FakeLLM(latency_s=0.05) as fake:
        fake.script(Turn(text="a"), Turn(text="b"))
        client = anthropic_client(fake)
        for _ in range(2):
            await client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        await client.close()
    assert fake.latency_total_s == 0.1
    assert fake.busy_s >= 0.1
    assert len(fake.usages) == 2 and fake.usages[0]["output_tokens"] >= 1


async def test_bodies_can_be_left_unrecorded() -> None:
    """With record_bodies off a request is still recorded, without its (large) JSON body."""
    async with FakeLLM(record_bodies=False) as fake:
        client = anthropic_client(fake)
        await client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x" * 4000}]
        )
        await client.close()
    assert len(fake.requests) == 1 and fake.requests[0].json is None
    assert fake.usages[0]["input_tokens"] == 1000


MODEL_CALLS = {
    "/v1/messages": {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]},
    "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": "q"}]},
    "/v1/responses": {
        "model": "m",
        "store": False,
        "input": [{"type": "message", "role": "user", "content": "q"}],
    },
}


@pytest.mark.parametrize(
    ("path", "envelope"),
    [
        (
            "/v1/messages",
            {"type": "authentication_error", "message": "x-api-key header is required"},
        ),
        ("/v1/chat/completions", {"type": "invalid_request_error", "param": None, "code": None}),
        ("/v1/responses", {"type": "invalid_request_error", "param": None, "code": None}),
    ],
)
async def test_a_model_request_without_a_key_gets_the_real_401(
    fake: FakeLLM, path: str, envelope: dict[str, Any]
) -> None:
    """No key, no answer, even when any key would do (docs.anthropic.com/en/api/errors; platform.openai.com/docs/api-reference/authentication)."""
    async with httpx2.AsyncClient(base_url=fake.url, timeout=5) as http:
        answer = await http.post(path, json=MODEL_CALLS[path], headers=ANTHROPIC_VERSION)
    assert answer.status_code == 401
    error = answer.json()["error"]
    assert {k: error[k] for k in envelope} == envelope
    if path != "/v1/messages":
        assert error["message"].startswith("You didn't provide an API key.")
    assert fake.usages == []


async def test_openai_wires_read_only_the_bearer_token(fake: FakeLLM) -> None:
    """OpenAI authenticates by `Authorization: Bearer` alone; an x-api-key there is no key (platform.openai.com/docs/api-reference/authentication)."""
    async with httpx2.AsyncClient(base_url=fake.url, timeout=5) as http:
        path = "/v1/chat/completions"
        by_header = await http.post(path, json=MODEL_CALLS[path], headers={"x-api-key": "k"})
        by_bearer = await http.post(
            path, json=MODEL_CALLS[path], headers={"Authorization": "Bearer k"}
        )
    assert (by_header.status_code, by_bearer.status_code) == (401, 200)


async def test_a_wrong_openai_key_gets_invalid_api_key() -> None:
    """A wrong key gets 401 invalid_request_error/invalid_api_key, the key masked (platform.openai.com/docs/guides/error-codes)."""
    wrong = "sk-wrong-key-0123456789"
    async with FakeLLM(expected_key="sk-right") as fake:
        with pytest.raises(openai.AuthenticationError) as caught:
            await openai_client(fake, key=wrong).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "q"}]
            )
    assert (caught.value.type, caught.value.code) == ("invalid_request_error", "invalid_api_key")
    assert caught.value.message.startswith("Error code: 401")
    body = caught.value.body
    assert isinstance(body, dict) and body["message"].startswith("Incorrect API key provided: sk-")
    assert wrong not in str(body) and body["message"].count("6789") == 1


@pytest.mark.parametrize("path", sorted(MODEL_CALLS))
@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'{"model": "m",', ("not valid JSON", "could not parse the JSON body")),
        (b"", ("not valid JSON", "could not parse the JSON body")),
        (b"\xff\xfe", ("not valid JSON", "could not parse the JSON body")),
        (b"[1, 2]", ("must be an object", "is not of type 'object'")),
    ],
)
async def test_a_body_that_is_not_a_json_object_gets_a_400_and_takes_no_turn(
    fake: FakeLLM, path: str, raw: bytes, fragment: tuple[str, str]
) -> None:
    """Unparsable or non-object bodies get the family's 400 envelope, not a 500, and the script waits (docs.anthropic.com/en/api/errors; platform.openai.com/docs/guides/error-codes)."""
    fake.script(Turn(text="kept"))
    headers = {"Authorization": "Bearer k", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(base_url=fake.url, timeout=5) as http:
        answer = await http.post(path, content=raw, headers={**headers, **ANTHROPIC_VERSION})
        after = await http.post(
            path, json=MODEL_CALLS[path], headers={**headers, **ANTHROPIC_VERSION}
        )
    assert answer.status_code == 400
    envelope = answer.json()
    anthropic_wire = path == "/v1/messages"
    assert envelope["error"]["type"] == "invalid_request_error"
    assert fragment[0 if anthropic_wire else 1] in envelope["error"]["message"]
    assert ("type" in envelope) is anthropic_wire
    assert fake.requests[0].json is None and after.status_code == 200
    assert "kept" in after.text
    fake.assert_complete()


async def test_http_client_for_keeps_the_public_host_and_serves_only_it(fake: FakeLLM) -> None:
    """Requests for the named host arrive here recorded with that Host; any other host fails to connect."""
    async with fake.http_client_for("https://api.openai.com/v1") as http:
        answer = await http.post(
            "https://api.openai.com/v1/responses",
            json=MODEL_CALLS["/v1/responses"],
            headers={"Authorization": "Bearer k"},
        )
        with pytest.raises(httpx2.ConnectError, match="only serves api.openai.com"):
            await http.post("https://chatgpt.com/backend-api/codex/responses", json={})
    assert answer.status_code == 200
    (recorded,) = fake.requests
    assert (recorded.api, recorded.host, recorded.path) == (
        "responses",
        "api.openai.com",
        "/v1/responses",
    )
    assert recorded.headers["authorization"] == "Bearer k"


async def test_bodies_up_to_the_size_limit_are_served_and_larger_ones_get_413(
    fake: FakeLLM,
) -> None:
    """A 2 MiB prompt is answered; one over 32 MB gets request_too_large (docs.anthropic.com/en/api/overview, request size limits)."""
    big = "x" * (2 * 1024 * 1024)
    reply = await anthropic_client(fake).messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": big}]
    )
    assert reply.usage.input_tokens == len(big) // 4
    huge = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "'
    huge += b"x" * (32 * 1024 * 1024) + b'"}]}'
    headers = {"x-api-key": "k", "Content-Type": "application/json", **ANTHROPIC_VERSION}
    async with httpx2.AsyncClient(base_url=fake.url, timeout=10) as http:
        answer = await http.post("/v1/messages", content=huge, headers=headers)
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "request_too_large"
    assert len(fake.usages) == 1


async def test_stall_after_events_sends_exactly_that_many(fake: FakeLLM) -> None:
    """`stall_after_events=3` sends message_start, ping, content_block_start, then goes silent."""
    fake.script(Turn(text="never finished", stall_after_events=3))
    seen: list[str] = []
    stream = await anthropic_client(fake).messages.create(
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
    stream = await openai_client(fake).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(pieces) == "one two three"
    assert loop.time() - started >= 0.02 * len(pieces)


async def test_every_reply_names_its_request(fake: FakeLLM) -> None:
    """Replies carry request-id (Anthropic) or x-request-id (OpenAI), which the SDKs expose (docs.anthropic.com/en/api/overview, response headers)."""
    message = await anthropic_client(fake).messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}]
    )
    completion = await openai_client(fake).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}]
    )
    assert message._request_id == "req_fake_0001"
    assert completion._request_id == "req_fake_0002"


@pytest.mark.parametrize("words", [0, 1, 7, WORD_DELTAS_UP_TO, WORD_DELTAS_UP_TO + 1, 2_401])
def test_a_text_streams_whole_one_word_a_delta_until_it_is_long(words: int) -> None:
    """Joined, the deltas are the text exactly; up to `WORD_DELTAS_UP_TO` words each is one
    word (tests count events by words), past it the text comes in `COARSE_DELTAS` runs."""
    text = " ".join(f"w{i}\n" if i % 5 == 0 else f"w{i}" for i in range(words))
    pieces = split_deltas(text)
    assert "".join(pieces) == text
    expected = words if words <= WORD_DELTAS_UP_TO else COARSE_DELTAS
    assert len(pieces) == expected
    assert all(piece.strip() for piece in pieces)
