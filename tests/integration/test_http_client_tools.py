"""Client tools and pass-through over the HTTP API: the real openai SDK (sync and async,
streamed and not) against our server, the runner and a Runtime on FakeLLM.

Contract: the OpenAI API reference, "Create chat completion"
(https://platform.openai.com/docs/api-reference/chat/create): a request's `tools` are offered
to the model, a call comes back as `message.tool_calls` with `finish_reason: "tool_calls"` (as
`delta.tool_calls` chunks when streamed, which the SDK's stream helper accumulates), and the
follow-up's `role: tool` messages carry the results; errors use the envelope
`{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.http import SESSION_HEADER, HttpApiServer
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.gateway.harness import make_config, start_runtime
from tests.waits import WAIT_S

KEY = "sk-hermes-test"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ARGS = '{"city": "Paris"}'


@dataclass(slots=True)
class Api:
    client: openai.AsyncOpenAI
    llm: FakeLLM
    base_url: str
    route: str

    def model_bodies(self) -> list[dict[str, Any]]:
        """What the fake model received, chat calls only, in order."""
        return [
            r.json for r in self.llm.requests if r.json is not None and r.api != "anthropic_count"
        ]


ROUTES = {
    "anthropic": {},
    "openai": {"provider": "custom", "api_key": "test-key"},
    "responses": {"provider": "openai", "api_mode": "responses", "api_key": "test-key"},
}


@pytest.fixture(params=sorted(ROUTES))
async def api(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Api]:
    """A runtime on FakeLLM (Anthropic, OpenAI Chat or Responses wire) behind HttpApiServer."""
    route: str = request.param
    async with FakeLLM() as llm:
        model = dict(ROUTES[route])
        if route != "anthropic":
            model["base_url"] = llm.openai_base_url
        config = make_config(
            llm,
            tmp_path / "state.db",
            model=model,
            tools={"enabled": ["read_file"], "workspace": str(tmp_path)},
        )
        async with start_runtime(config, _hermes_home(tmp_path), monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
            await server.start()
            base_url = f"http://127.0.0.1:{server.port}/v1"
            client = openai.AsyncOpenAI(
                api_key=KEY, base_url=base_url, max_retries=0, timeout=WAIT_S
            )
            try:
                yield Api(client=client, llm=llm, base_url=base_url, route=route)
            finally:
                await client.close()
                await server.stop()
                await runner.stop()


def _offered_tools(api: Api, body: dict[str, Any]) -> list[str]:
    tools = body.get("tools") or []
    if api.route in ("anthropic", "responses"):  # flat tools on both
        return [t["name"] for t in tools]
    return [t["function"]["name"] for t in tools]


def _tool_results(api: Api, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, result text) of every tool result the model received."""
    found: list[tuple[str, str]] = []
    if api.route == "responses":
        return [
            (item["call_id"], item["output"])
            for item in body["input"]
            if item.get("type") == "function_call_output"
        ]
    for message in body["messages"]:
        if api.route == "openai" and message["role"] == "tool":
            found.append((message["tool_call_id"], message["content"]))
        if api.route == "anthropic" and isinstance(message["content"], list):
            found += [
                (
                    b["tool_use_id"],
                    b["content"] if isinstance(b["content"], str) else b["content"][0]["text"],
                )
                for b in message["content"]
                if b.get("type") == "tool_result"
            ]
    return found


def _calls(call_id: str = "call_w1") -> Turn:
    return Turn(text="", tool_calls=[ToolCallSpec(name="get_weather", arguments=ARGS, id=call_id)])


async def test_client_tools_round_trip(api: Api) -> None:
    """call -> role: tool -> final answer, non-streamed: the client's tool (not Hermes' own)
    reaches the model, its call comes back in the OpenAI shape, and the follow-up's result
    reaches the model paired with the call."""
    api.llm.script(_calls(), Turn(text="It is sunny in Paris."))
    question = [{"role": "user", "content": "Weather in Paris?"}]
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model", messages=question, tools=[WEATHER]
    )
    first = raw.parse()
    session_id = raw.headers[SESSION_HEADER]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None and len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert _offered_tools(api, api.model_bodies()[0]) == ["get_weather"]  # not read_file

    follow_up = [
        *question,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24C"},
    ]
    final = await api.client.chat.completions.create(
        model="test-model",
        messages=follow_up,  # type: ignore[arg-type]
        tools=[WEATHER],
        extra_headers={SESSION_HEADER: session_id},
    )
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "It is sunny in Paris."
    assert final.choices[0].message.tool_calls is None
    bodies = api.model_bodies()
    assert len(bodies) == 2
    assert _tool_results(api, bodies[1]) == [(call.id, "sunny, 24C")]
    api.llm.assert_complete()


async def test_client_tools_round_trip_streamed(api: Api) -> None:
    """The same round trip streamed: tool calls arrive as `delta.tool_calls` chunks that the
    SDK's stream helper folds into one call, with finish_reason tool_calls."""
    api.llm.script(
        Turn(
            text="Let me check.",
            tool_calls=[ToolCallSpec(name="get_weather", arguments=ARGS, id="call_s1")],
        ),
        Turn(text="Sunny."),
    )
    question = [{"role": "user", "content": "Weather in Paris?"}]
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model", messages=question, tools=[WEATHER], stream=True
    )
    session_id = raw.headers[SESSION_HEADER]
    chunks = [c async for c in raw.parse()]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    heads = [d.tool_calls[0] for d in deltas if d.tool_calls and d.tool_calls[0].id]
    assert [(h.index, h.id, h.type, h.function and h.function.name) for h in heads] == [
        (0, "call_s1", "function", "get_weather")
    ]
    arguments = "".join(
        (d.tool_calls[0].function.arguments or "")
        for d in deltas
        if d.tool_calls and d.tool_calls[0].function
    )
    assert json.loads(arguments) == {"city": "Paris"}
    assert "".join(d.content or "" for d in deltas) == "Let me check."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"

    async with api.client.chat.completions.stream(
        model="test-model",
        messages=[
            *question,
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_s1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ARGS},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_s1", "content": "sunny"},
        ],
        tools=[WEATHER],
        extra_headers={SESSION_HEADER: session_id},
    ) as stream:
        final = await stream.get_final_completion()
    assert final.choices[0].message.content == "Sunny."
    assert _tool_results(api, api.model_bodies()[1]) == [("call_s1", "sunny")]


async def test_stream_helper_accumulates_streamed_tool_calls(api: Api) -> None:
    """`client.chat.completions.stream(...)` (the SDK's accumulator) rebuilds two parallel
    calls from our deltas, ids, names and JSON arguments intact."""
    api.llm.script(
        Turn(
            tool_calls=[
                ToolCallSpec(name="get_weather", arguments=ARGS, id="call_a"),
                ToolCallSpec(
                    name="get_weather", arguments='{"city": "' + "x" * 600 + '"}', id="call_b"
                ),
            ]
        )
    )
    async with api.client.chat.completions.stream(
        model="test-model", messages=[{"role": "user", "content": "two cities"}], tools=[WEATHER]
    ) as stream:
        final = await stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [c.id for c in calls] == ["call_a", "call_b"]
    assert json.loads(calls[1].function.arguments)["city"] == "x" * 600
    assert final.choices[0].finish_reason == "tool_calls"


async def test_sync_client_round_trip(api: Api) -> None:
    """The synchronous openai client drives the same round trip (from a worker thread, as the
    server runs on this test's loop)."""
    api.llm.script(_calls("call_sync"), Turn(text="Done."))

    def conversation() -> tuple[str | None, str | None]:
        with openai.OpenAI(
            api_key=KEY, base_url=api.base_url, max_retries=0, timeout=WAIT_S
        ) as client:
            question: list[Any] = [{"role": "user", "content": "Weather?"}]
            raw = client.chat.completions.with_raw_response.create(
                model="test-model", messages=question, tools=[WEATHER]
            )
            first = raw.parse()
            message = first.choices[0].message
            final = client.chat.completions.create(
                model="test-model",
                messages=[
                    *question,
                    message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": "call_sync", "content": "rain"},
                ],
                tools=[WEATHER],
                extra_headers={SESSION_HEADER: raw.headers[SESSION_HEADER]},
            )
            return first.choices[0].finish_reason, final.choices[0].message.content

    assert await asyncio.to_thread(conversation) == ("tool_calls", "Done.")
    assert _tool_results(api, api.model_bodies()[1]) == [("call_sync", "rain")]


async def test_a_result_for_an_unknown_call_is_a_400(api: Api) -> None:
    """A `role: tool` message whose tool_call_id answers no waiting call is refused, naming
    the message; the model is not called and nothing is stored."""
    api.llm.script(_calls("call_real"))
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model", messages=[{"role": "user", "content": "w?"}], tools=[WEATHER]
    )
    session_id = raw.headers[SESSION_HEADER]
    messages = [
        {"role": "user", "content": "w?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_real",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ARGS},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_bogus", "content": "x"},
    ]
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            await api.client.chat.completions.create(
                model="test-model",
                messages=messages,  # type: ignore[arg-type]
                tools=[WEATHER],
                stream=stream,
                extra_headers={SESSION_HEADER: session_id},
            )
        assert caught.value.status_code == 400
        body = caught.value.body
        assert isinstance(body, dict) and body["param"] == "messages[2].tool_call_id"
        assert "call_bogus" in body["message"]
    assert len(api.model_bodies()) == 1
    # The refusal stored nothing: the right result still continues the turn.
    api.llm.script(Turn(text="Sunny after all."))
    messages[2] = {"role": "tool", "tool_call_id": "call_real", "content": "sunny"}
    final = await api.client.chat.completions.create(
        model="test-model",
        messages=messages,  # type: ignore[arg-type]
        tools=[WEATHER],
        extra_headers={SESSION_HEADER: session_id},
    )
    assert final.choices[0].message.content == "Sunny after all."
    assert _tool_results(api, api.model_bodies()[1]) == [("call_real", "sunny")]


async def test_abandoned_calls_are_closed_before_the_next_user_message(api: Api) -> None:
    """The client ignores the tool calls and asks something else: the dangling call gets a
    result before the new user message, so the model receives a well-paired transcript."""
    api.llm.script(_calls("call_left"), Turn(text="Hello again."))
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model", messages=[{"role": "user", "content": "w?"}], tools=[WEATHER]
    )
    reply = await api.client.chat.completions.create(
        model="test-model",
        messages=[{"role": "user", "content": "never mind, hi"}],
        extra_headers={SESSION_HEADER: raw.headers[SESSION_HEADER]},
    )
    assert reply.choices[0].message.content == "Hello again."
    results = _tool_results(api, api.model_bodies()[1])
    assert [call_id for call_id, _ in results] == ["call_left"]
    # Without `tools` Hermes' own tools serve the turn again.
    assert "read_file" in _offered_tools(api, api.model_bodies()[1])


def _hermes_home(tmp_path: Path) -> Path:
    """HERMES_HOME beside the workspace (tmp_path): a workspace never holds HERMES_HOME."""
    home = tmp_path.parent / f"{tmp_path.name}-hermes"
    home.mkdir(exist_ok=True)
    return home
