"""`/v1/responses` end to end with the real openai SDK (sync and async, streamed or not).

Contract: OpenAI API reference, "Responses" ("Create a model response": `input`,
`instructions`, `previous_response_id`, `store`; the `Response` object) and "Streaming events"
(the `response.*` event sequence that `client.responses.stream()` accumulates).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest

from gateway.http.conversations import CLIENT_SYSTEM_HEADING
from tests.gateway.harness import request_texts
from tests.integration.test_http_stateless import Api, serving

EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    async with serving(tmp_path, monkeypatch) as served:
        yield served


def _last_texts(api: Api) -> list[str]:
    return request_texts({"messages": api.chat_requests()[-1]["messages"]})


async def test_create_and_continue_with_previous_response_id(api: Api) -> None:
    """A response, then one continuing it: the model gets the stored conversation plus the new
    input, on the same session; `instructions` reach the model's system message."""
    first = await api.client.responses.create(
        model="test-model", input="remember 42", instructions="Answer in French."
    )
    assert first.id.startswith("resp_") and first.output_text == "echo: remember 42"
    assert first.status == "completed" and first.usage is not None and first.usage.input_tokens > 0
    system = request_texts({"system": api.chat_requests()[-1].get("system")})
    assert any(CLIENT_SYSTEM_HEADING in s and "Answer in French." in s for s in system)
    second = await asyncio.to_thread(
        api.sync.responses.create,
        model="test-model",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "which number?"}]}],
        previous_response_id=first.id,
    )
    assert second.output_text == "echo: which number?"
    assert _last_texts(api) == ["remember 42", "echo: remember 42", "which number?"]
    assert second.previous_response_id == first.id
    assert await api.http_sessions() == 1


async def test_only_the_newest_stored_response_continues(api: Api) -> None:
    """An unknown id, an older response of a conversation, or one created with store=false:
    a 400 naming previous_response_id, never a wrong context."""
    first = await api.client.responses.create(model="test-model", input="one")
    await api.client.responses.create(
        model="test-model", input="two", previous_response_id=first.id
    )
    unstored = await api.client.responses.create(model="test-model", input="x", store=False)
    for stale in ("resp_unknown", first.id, unstored.id):
        with pytest.raises(openai.BadRequestError) as caught:
            await api.client.responses.create(
                model="test-model", input="three", previous_response_id=stale
            )
        assert caught.value.param == "previous_response_id"  # type: ignore[attr-defined]


async def test_streamed_events_parse_with_the_sdk(api: Api) -> None:
    """`responses.create(stream=True)` yields the documented event sequence; the SDK's
    `responses.stream()` helper (async and sync) accumulates the final response."""
    stream = await api.client.responses.create(
        model="test-model", input="one two three", stream=True
    )
    kinds: list[str] = []
    deltas: list[str] = []
    async for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
    assert [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k] == EVENTS
    assert "".join(deltas) == "echo: one two three" and len(deltas) > 1

    async with api.client.responses.stream(model="test-model", input="again") as helper:
        async for _ in helper:
            pass
        final = await helper.get_final_response()
    assert final.output_text == "echo: again" and final.status == "completed"

    def sync_stream() -> str:
        with api.sync.responses.stream(
            model="test-model", input="and more", previous_response_id=final.id
        ) as helper:
            return helper.get_final_response().output_text

    assert await asyncio.to_thread(sync_stream) == "echo: and more"
    assert _last_texts(api) == ["again", "echo: again", "and more"]


async def test_a_bad_body_is_an_openai_error(api: Api) -> None:
    """A missing `input`, or a file part this server cannot take, is a 400 in the error
    envelope naming the field; nothing is dropped silently."""
    with pytest.raises(openai.BadRequestError) as caught:
        await api.client.responses.create(model="test-model")  # type: ignore[call-overload]
    assert caught.value.param == "input"  # type: ignore[attr-defined]
    image = {"type": "input_file", "file_id": "file-123"}
    with pytest.raises(openai.BadRequestError) as caught:
        await api.client.responses.create(
            model="test-model",
            input=[{"role": "user", "content": [image]}],  # type: ignore[list-item]
        )
    assert caught.value.param == "input[0].content[0].type"  # type: ignore[attr-defined]
    assert not api.chat_requests()


async def test_an_unknown_model_is_a_400_listing_the_served_names(api: Api) -> None:
    """The request's `model` is honoured or refused, never echoed over another model's answer
    (issue 12); nothing is stored and the model is not called."""
    with pytest.raises(openai.BadRequestError) as caught:
        await api.client.responses.create(model="gpt-9", input="hello")
    assert caught.value.param == "model"  # type: ignore[attr-defined]
    assert "test-model" in str(caught.value)
    assert not api.chat_requests()
    assert await api.http_sessions() == 0


async def test_a_provider_failure_is_an_http_error_not_a_200(api: Api) -> None:
    """The model's server fails (Anthropic 529 overloaded): the create is a 5xx in the error
    envelope with the provider's kind (the SDK raises, as it does against OpenAI), and a
    stream ends with `response.failed` carrying that kind; the next create is answered."""
    from sim.llm_server import Turn

    overloaded = Turn(error=(529, "overloaded_error", "Overloaded"))
    api.llm.script(overloaded)
    with pytest.raises(openai.APIStatusError) as caught:
        await api.client.responses.create(model="test-model", input="are you there?")
    assert caught.value.status_code in (502, 503), caught.value
    assert isinstance(caught.value.body, dict) and caught.value.body.get("code")
    api.llm.script(overloaded)
    async with api.client.responses.stream(model="test-model", input="and now?") as stream:
        kinds = [event.type async for event in stream]
    assert kinds[-1] == "response.failed"
    fine = await api.client.responses.create(model="test-model", input="hello again")
    assert fine.output_text == "echo: hello again"
