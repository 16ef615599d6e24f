"""Pass-through fields and refusals over the HTTP API, asserted on what the fake model received.

Contracts: OpenAI "Create chat completion" (https://platform.openai.com/docs/api-reference/chat/create)
for what the client sends and what an OpenAI-compatible route receives; Anthropic Messages
(https://docs.anthropic.com/en/api/messages) for the Anthropic route's `tool_choice`
{"type": "any" | "tool", "name", "disable_parallel_tool_use"} and `stop_sequences`; the OpenAI
error envelope `{"error": {"message", "type", "param", "code"}}` for every refusal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from gateway.http import HttpApiServer
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import make_config, start_runtime
from tests.waits import WAIT_S

KEY = "sk-hermes-test"
TOOL = {
    "type": "function",
    "function": {"name": "lookup", "description": "Look up.", "parameters": {"type": "object"}},
}
SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
        "strict": True,
    },
}
ROUTES: dict[str, dict[str, Any]] = {
    "anthropic": {},
    "openai": {"provider": "custom"},
    "responses": {"provider": "openai", "api_mode": "responses"},
}


class Served:
    def __init__(self, llm: FakeLLM, base_url: str) -> None:
        self.llm, self.base_url = llm, base_url
        self.client = openai.AsyncOpenAI(
            api_key=KEY, base_url=base_url, max_retries=0, timeout=WAIT_S
        )

    def last_body(self) -> dict[str, Any]:
        bodies = [r.json for r in self.llm.requests if r.json is not None]
        assert bodies, "the model was never called"
        return bodies[-1]


async def _serve(
    route: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    async with FakeLLM() as llm:
        model = dict(ROUTES[route])
        if route != "anthropic":
            model["base_url"] = llm.openai_base_url
        config = make_config(llm, tmp_path / "state.db", model=model)
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
            await server.start()
            served = Served(llm, f"http://127.0.0.1:{server.port}/v1")
            try:
                yield served
            finally:
                await served.client.close()
                await server.stop()
                await runner.stop()


@pytest.fixture(params=sorted(ROUTES))
async def served(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    async for one in _serve(request.param, tmp_path, monkeypatch):
        one.route = request.param  # type: ignore[attr-defined]
        yield one


@pytest.fixture
async def anthropic_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    async for one in _serve("anthropic", tmp_path, monkeypatch):
        yield one


HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("stream", [False, True])
async def test_every_pass_through_field_reaches_the_openai_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """tool_choice, parallel_tool_calls, response_format (json_schema), temperature, top_p,
    max_tokens, stop and seed reach an OpenAI-compatible model as the client sent them."""
    async for served in _serve("openai", tmp_path, monkeypatch):
        served.llm.script(Turn(text='{"a": "b"}'))
        kwargs: dict[str, Any] = dict(
            model="test-model",
            messages=HI,
            tools=[{**TOOL, "function": {**TOOL["function"], "strict": True}}],
            tool_choice={"type": "function", "function": {"name": "lookup"}},
            parallel_tool_calls=False,
            response_format=SCHEMA,
            temperature=0.25,
            top_p=0.5,
            max_tokens=64,
            stop=["END", "STOP"],
            seed=42,
        )
        if stream:
            async with served.client.chat.completions.stream(**kwargs) as events:
                await events.get_final_completion()
        else:
            await served.client.chat.completions.create(**kwargs)
        body = served.last_body()
        assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
        assert body["parallel_tool_calls"] is False
        assert body["response_format"] == SCHEMA
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.25, 0.5, 64)
        assert (body["stop"], body["seed"]) == (["END", "STOP"], 42)
        assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]
        assert body["tools"][0]["function"]["strict"] is True


async def test_json_object_and_max_completion_tokens_reach_the_openai_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async for served in _serve("openai", tmp_path, monkeypatch):
        served.llm.script(Turn(text="{}"))
        await served.client.chat.completions.create(
            model="test-model",
            messages=HI,
            response_format={"type": "json_object"},
            max_completion_tokens=33,
            stop="END",
        )
        body = served.last_body()
        assert body["response_format"] == {"type": "json_object"}
        assert body["max_tokens"] == 33 and body["stop"] == ["END"]


async def test_pass_through_fields_reach_the_anthropic_route_in_its_terms(
    anthropic_route: Served,
) -> None:
    """tool_choice becomes {"type": "tool", "name"} (required: "any"), parallel_tool_calls
    false becomes disable_parallel_tool_use, stop becomes stop_sequences, response_format
    becomes output_config.format (structured output), max_tokens stays max_tokens."""
    anthropic_route.llm.script(Turn(text="ok"), Turn(text="ok"))
    await anthropic_route.client.chat.completions.create(
        model="test-model",
        messages=HI,
        tools=[TOOL],
        tool_choice={"type": "function", "function": {"name": "lookup"}},
        parallel_tool_calls=False,
        response_format=SCHEMA,
        max_tokens=50,
        stop=["END"],
    )
    body = anthropic_route.last_body()
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "lookup",
        "disable_parallel_tool_use": True,
    }
    assert body["max_tokens"] == 50 and body["stop_sequences"] == ["END"]
    schema = SCHEMA["json_schema"]["schema"]  # type: ignore[index]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert [t["name"] for t in body["tools"]] == ["lookup"]
    await anthropic_route.client.chat.completions.create(
        model="test-model",
        messages=HI,
        tools=[TOOL],
        tool_choice="required",
        response_format={"type": "json_object"},
        stream=True,
    )
    body = anthropic_route.last_body()
    assert body["tool_choice"] == {"type": "any"}
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": {"type": "object"}}
    }


async def test_pass_through_fields_reach_the_responses_route_in_its_terms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Responses takes a flat function tool_choice and the schema as text.format."""
    async for served in _serve("responses", tmp_path, monkeypatch):
        served.llm.script(Turn(text='{"a": "b"}'))
        await served.client.chat.completions.create(
            model="test-model",
            messages=HI,
            tools=[TOOL],
            tool_choice={"type": "function", "function": {"name": "lookup"}},
            parallel_tool_calls=True,
            response_format=SCHEMA,
            temperature=0.1,
            top_p=0.2,
            max_tokens=40,
        )
        body = served.last_body()
        assert body["tool_choice"] == {"type": "function", "name": "lookup"}
        assert body["parallel_tool_calls"] is True
        assert body["text"] == {"format": {"type": "json_schema", **SCHEMA["json_schema"]}}
        assert (body["temperature"], body["top_p"], body["max_output_tokens"]) == (0.1, 0.2, 40)


REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("any", {"n": 2}, "n"),
    ("any", {"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    (
        "any",
        {
            "messages": [
                {"role": "system", "content": "s"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is it?"},
                        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                    ],
                },
            ]
        },
        "messages[1].content[1]",
    ),
    ("any", {"temperature": "warm"}, "temperature"),
    ("any", {"logprobs": True}, "logprobs"),
    ("anthropic", {"seed": 1}, "seed"),
    ("anthropic", {"temperature": 0.7}, "temperature"),
    ("anthropic", {"top_p": 0.9}, "top_p"),
    ("responses", {"stop": ["x"]}, "stop"),
    ("responses", {"seed": 1}, "seed"),
]


REFUSAL_CASES = [
    (served_route, fields, param)
    for route, fields, param in REFUSALS
    for served_route in (sorted(ROUTES) if route == "any" else [route])
]
"""Each refusal on each route it applies to ("any": every route)."""


@pytest.mark.parametrize(("route", "fields", "param"), REFUSAL_CASES)
async def test_every_refusal_is_a_400_in_the_envelope(
    route: str,
    fields: dict[str, Any],
    param: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each refusal is a 400 invalid_request_error naming the field, streamed or not, and the
    model is never called."""
    async for served in _serve(route, tmp_path, monkeypatch):
        for stream in (False, True):
            body: dict[str, Any] = {
                "model": "test-model",
                "messages": HI,
                "stream": stream,
                **fields,
            }
            with pytest.raises(openai.BadRequestError) as caught:
                await served.client.chat.completions.create(**body)
            error = caught.value.body
            assert isinstance(error, dict)
            assert (error["type"], error["param"]) == ("invalid_request_error", param)
            assert error["message"] and "pydantic" not in error["message"]
        assert served.llm.requests == []


async def test_missing_messages_answers_a_sentence_not_internals(anthropic_route: Served) -> None:
    """The raw envelope, as curl sees it: status 400, all four keys, no library internals."""
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{anthropic_route.base_url}/chat/completions",
            json={"model": "test-model"},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=aiohttp.ClientTimeout(total=WAIT_S),
        ) as response:
            assert response.status == 400
            body = await response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["param"] == "messages"
    assert body["error"]["message"] == "messages is required"
    for internal in ("_ChatBody", "_Body", "pydantic"):
        assert internal not in str(body)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_cut_by_max_tokens_says_length(anthropic_route: Served, stream: bool) -> None:
    """finish_reason is "length" when the model stopped at the client's max_tokens."""
    anthropic_route.llm.script(Turn(text="a long answer, cut", stop="max_tokens"))
    if stream:
        chunks = await anthropic_route.client.chat.completions.create(
            model="test-model", messages=HI, max_tokens=5, stream=True
        )
        finishes = [c.choices[0].finish_reason async for c in chunks if c.choices]
        assert finishes[-1] == "length"
    else:
        reply = await anthropic_route.client.chat.completions.create(
            model="test-model", messages=HI, max_tokens=5
        )
        assert reply.choices[0].finish_reason == "length"
    assert anthropic_route.last_body()["max_tokens"] == 5
