"""`/v1/responses` as specified: `store: false` and client function tools, with the real openai
SDK (`responses.create` and `responses.stream`) against the runtime on FakeLLM (issue 33).

Contract: OpenAI API reference, "Create a model response": `store` ("Whether to store the
generated model response for later retrieval via API"), `previous_response_id`, `tools`
(function tools: `type`, `name`, `description`, `parameters`, `strict`) and the input item
types `function_call` and `function_call_output`; "Streaming events":
`response.output_item.added` / `response.function_call_arguments.delta` / `.done` /
`response.output_item.done` for a function call item.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from sim.llm_server import ToolCallSpec, Turn
from tests.gateway.harness import request_texts
from tests.integration.test_http_stateless import Api, serving

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
ARGS = '{"city": "Paris"}'


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    async with serving(tmp_path, monkeypatch) as served:
        yield served


async def _rows(api: Api) -> int:
    store = api.runtime.store
    total = 0
    for info in await store.sessions.list_sessions(limit=1000):
        total += len(await store.transcript.show(info.id, include_archived=True))
    return total


async def test_store_false_stores_nothing_and_the_chain_stays_continuable(api: Api) -> None:
    """A `store: false` continuation sees the chain's conversation, stores no row and no
    session, and cannot itself be continued; the response it continued is still the newest
    stored one, so continuing that works (issue 33 saw it refused)."""
    first = await api.client.responses.create(model="test-model", input="remember 42")
    sessions, rows = await api.http_sessions(), await _rows(api)
    aside = await api.client.responses.create(
        model="test-model", input="a private aside", previous_response_id=first.id, store=False
    )
    assert aside.output_text == "echo: a private aside" and aside.store is False
    assert request_texts({"messages": api.chat_requests()[-1]["messages"]}) == [
        "remember 42",
        "echo: remember 42",
        "a private aside",
    ]
    assert await api.http_sessions() == sessions and await _rows(api) == rows
    with pytest.raises(openai.BadRequestError):
        await api.client.responses.create(
            model="test-model", input="more", previous_response_id=aside.id
        )
    second = await api.client.responses.create(
        model="test-model", input="which number?", previous_response_id=first.id
    )
    assert second.output_text == "echo: which number?"
    texts = request_texts({"messages": api.chat_requests()[-1]["messages"]})
    assert texts == ["remember 42", "echo: remember 42", "which number?"]  # no aside in it


async def test_store_false_alone_leaves_no_session(api: Api) -> None:
    """A first request with `store: false`, streamed or not: answered, and the store is as
    empty as before."""
    reply = await api.client.responses.create(model="test-model", input="hello", store=False)
    async with api.client.responses.stream(
        model="test-model", input="hello again", store=False
    ) as stream:
        final = await stream.get_final_response()
    assert reply.output_text == "echo: hello" and final.output_text == "echo: hello again"
    assert await api.http_sessions() == 0 and await _rows(api) == 0


def _calls(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "function_call"]


def _tool_results(api: Api) -> list[dict[str, Any]]:
    """The tool results the model received in its last request (Anthropic wire)."""
    body = api.chat_requests()[-1]
    results = []
    for message in body["messages"]:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                results.append(block)
    return results


async def test_function_tool_round_trip_with_create(api: Api) -> None:
    """The client's function tool reaches the model; its call comes back as a `function_call`
    item; `function_call_output` with previous_response_id continues the turn and the model
    gets the output as the call's result."""
    api.llm.script(
        Turn(tool_calls=[ToolCallSpec("get_weather", ARGS)]), Turn(text="It is sunny in Paris.")
    )
    first = await api.client.responses.create(
        model="test-model",
        input="weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert [t["name"] for t in api.chat_requests()[-1]["tools"]] == ["get_weather"]
    (call,) = _calls(first)
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    second = await api.client.responses.create(
        model="test-model",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 24C"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.output_text == "It is sunny in Paris." and not _calls(second)
    (result,) = _tool_results(api)
    assert result["tool_use_id"] == call.call_id and "sunny, 24C" in json.dumps(result)


async def test_function_tool_round_trip_with_stream(api: Api) -> None:
    """The same loop over `responses.stream`: the SDK accumulates the function call from the
    argument deltas, and the continuation streams the answer."""
    api.llm.script(
        Turn(tool_calls=[ToolCallSpec("get_weather", ARGS)]), Turn(text="Sunny in Paris.")
    )
    async with api.client.responses.stream(
        model="test-model",
        input="weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
    ) as stream:
        kinds = [event.type async for event in stream]
        first = await stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert kinds[-1] == "response.completed"
    (call,) = _calls(first)
    assert json.loads(call.arguments) == {"city": "Paris"}
    async with api.client.responses.stream(
        model="test-model",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],  # type: ignore[list-item]
    ) as stream:
        second = await stream.get_final_response()
    assert second.output_text == "Sunny in Paris."


async def test_a_stateless_replay_with_function_items_round_trips(api: Api) -> None:
    """A client that keeps its own history (no previous_response_id) replays the call and its
    output as items: the model gets them as a call and its result."""
    api.llm.script(Turn(text="Sunny."))
    reply = await api.client.responses.create(
        model="test-model",
        tools=[WEATHER],  # type: ignore[list-item]
        input=[
            {"role": "user", "content": "weather in Paris?"},
            {
                "type": "function_call",
                "call_id": "call_9",
                "name": "get_weather",
                "arguments": ARGS,
            },
            {"type": "function_call_output", "call_id": "call_9", "output": "sunny"},
        ],
    )
    assert reply.output_text == "Sunny."
    (result,) = _tool_results(api)
    assert result["tool_use_id"] == "call_9"


async def test_built_in_tools_are_refused_by_name(api: Api) -> None:
    """A tool type the server cannot run is a 400 naming it, not a silent drop."""
    with pytest.raises(openai.BadRequestError) as caught:
        await api.client.responses.create(
            model="test-model",
            input="hi",
            tools=[{"type": "web_search"}],  # type: ignore[list-item]
        )
    assert caught.value.param == "tools[0]"  # type: ignore[attr-defined]
