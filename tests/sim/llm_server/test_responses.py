"""The OpenAI Responses wire of FakeLLM, judged by the real openai SDK: replies, items, refusals."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest

from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.sim.llm_server.clients import openai_client


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


async def test_text_and_calls_come_back_as_output_items(fake: FakeLLM) -> None:
    """A scripted turn becomes a message item then function_call items, with chars/4 usage."""
    fake.script(Turn(text="on it", tool_calls=[ToolCallSpec("f", '{"a": 1}', id="c9")]))
    response = await openai_client(fake).responses.create(
        model="m", input=[_user("abcdefgh")], instructions="be", store=False
    )
    assert [item.type for item in response.output] == ["message", "function_call"]
    assert response.output_text == "on it"
    call = response.output[1]
    assert (call.call_id, call.name, call.arguments) == ("c9", "f", '{"a": 1}')  # type: ignore[union-attr]
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 4)
    assert fake.requests[0].api == "responses"


async def test_stream_deltas_join_to_the_text(fake: FakeLLM) -> None:
    """Streamed output_text deltas rebuild the text exactly, spaces included."""
    fake.script(Turn(text="two  spaces and\nlines"))
    stream = await openai_client(fake).responses.create(
        model="m", input=[_user("q")], store=False, stream=True
    )
    events = [event async for event in stream]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]  # type: ignore[union-attr]
    assert "".join(deltas) == "two  spaces and\nlines"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.completed"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_max_tokens_stop_is_an_incomplete_response(fake: FakeLLM, stream: bool) -> None:
    """stop=max_tokens answers status incomplete, reason max_output_tokens (platform.openai.com/docs/api-reference/responses/object)."""
    fake.script(Turn(text="cut", stop="max_tokens"))
    client = openai_client(fake)
    if stream:
        events = [
            e
            async for e in await client.responses.create(
                model="m", input=[_user("q")], store=False, stream=True
            )
        ]
        assert events[-1].type == "response.incomplete"
        response = events[-1].response  # type: ignore[union-attr]
    else:
        response = await client.responses.create(model="m", input=[_user("q")], store=False)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"


async def test_encrypted_items_replay_only_to_their_issuer(fake: FakeLLM) -> None:
    """A compaction item issued for one Host is refused by another with invalid_encrypted_content."""
    fake.script(Turn(text="a", compaction=True))
    first = await openai_client(fake).responses.create(model="m", input=[_user("q")], store=False)
    item = first.output[0].model_dump()
    assert item["type"] == "compaction"
    replay = [{"type": "compaction", "encrypted_content": item["encrypted_content"]}, _user("q2")]
    again = await openai_client(fake).responses.create(model="m", input=replay, store=False)
    assert again.output_text == "echo: q2"
    async with fake.http_client_for("https://api.openai.com/v1") as http:
        elsewhere = openai.AsyncOpenAI(
            api_key="k", base_url="https://api.openai.com/v1", http_client=http, max_retries=0
        )
        with pytest.raises(openai.BadRequestError) as caught:
            await elsewhere.responses.create(model="m", input=replay, store=False)
    assert caught.value.code == "invalid_encrypted_content"


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"store": False, "input": [_user("q")]}, "missing_required_parameter", "model"),
        ({"model": "m", "store": False, "input": ["q"]}, "invalid_input", None),
        (
            {"model": "m", "store": False, "input": [{"type": "message", "role": "user"}]},
            "invalid_input",
            None,
        ),
        (
            {"model": "m", "store": False, "input": [_user("q")], "instructions": ["x"]},
            None,
            "instructions",
        ),
        (
            {"model": "m", "store": False, "input": [_user("q")], "tools": [{"type": "function"}]},
            "missing_required_parameter",
            "tools[0].name",
        ),
        (
            {
                "model": "m",
                "store": False,
                "input": [{"type": "reasoning", "encrypted_content": ["x"], "summary": []}],
            },
            "invalid_encrypted_content",
            None,
        ),
        (
            {
                "model": "m",
                "store": False,
                "input": [_user("q")],
                "context_management": [{"type": "compaction", "compact_threshold": "big"}],
            },
            None,
            "context_management[0].compact_threshold",
        ),
    ],
)
async def test_malformed_requests_get_a_400_not_a_crash(
    fake: FakeLLM, body: dict[str, Any], code: str | None, param: str | None
) -> None:
    """Shapes the Responses API refuses get its 400 envelope (platform.openai.com/docs/api-reference/responses/create)."""
    async with httpx2.AsyncClient(base_url=fake.url, timeout=5) as http:
        answer = await http.post("/v1/responses", json=body, headers={"Authorization": "Bearer k"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, param)
    assert fake.usages == []
