"""`parse_chat_request`: the OpenAI Chat Completions request body, checked field by field.

Contract: https://platform.openai.com/docs/api-reference/chat/create (field names and types as
`openai.types.chat.completion_create_params` has them). A refusal is a 400
`invalid_request_error` whose `param` names the field, in a sentence without library internals.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.providers.call_options import CallOptions
from gateway.http.client_request import parse_chat_request, refuse_unsupported
from gateway.http.error_envelope import ApiError

HI = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}


def _refusal(body: object) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_chat_request(body)
    error = caught.value
    assert error.status == 400 and error.kind == "invalid_request_error"
    for internal in ("pydantic", "_Body", "_Tool", "errors.pydantic.dev", "Field required"):
        assert internal not in error.message
    return error


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": HI, "n": 2}, "n"),
        ({"messages": HI, "temperature": "hot"}, "temperature"),
        ({"messages": HI, "temperature": 2.5}, "temperature"),
        ({"messages": HI, "top_p": 1.5}, "top_p"),
        ({"messages": HI, "max_tokens": 0}, "max_tokens"),
        ({"messages": HI, "max_completion_tokens": -1}, "max_completion_tokens"),
        ({"messages": HI, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"messages": HI, "stop": 5}, "stop"),
        ({"messages": HI, "seed": "x"}, "seed"),
        ({"messages": HI, "logprobs": True}, "logprobs"),
        ({"messages": HI, "top_logprobs": 3}, "top_logprobs"),
        ({"messages": HI, "logit_bias": {"50256": -100}}, "logit_bias"),
        ({"messages": HI, "presence_penalty": 0.5}, "presence_penalty"),
        ({"messages": HI, "modalities": ["text", "audio"]}, "modalities"),
        ({"messages": HI, "audio": {"voice": "alloy", "format": "mp3"}}, "audio"),
        ({"messages": HI, "functions": [{"name": "f"}]}, "functions"),
        ({"messages": HI, "reasoning_effort": "high"}, "reasoning_effort"),
        ({"messages": HI, "stream_options": {"include_usage": True}}, "stream_options"),
        ({"messages": HI, "tool_choice": "auto"}, "tool_choice"),
        ({"messages": HI, "tools": [TOOL], "tool_choice": "sometimes"}, "tool_choice"),
        (
            {
                "messages": HI,
                "tools": [TOOL],
                "tool_choice": {"type": "function", "function": {"name": "other"}},
            },
            "tool_choice",
        ),
        (
            {"messages": HI, "tools": [{"type": "function", "function": {}}]},
            "tools[0].function.name",
        ),
        ({"messages": HI, "tools": [{"type": "custom", "custom": {"name": "x"}}]}, "tools[0].type"),
        ({"messages": HI, "tools": [TOOL, TOOL]}, "tools[1].function.name"),
        ({"messages": HI, "response_format": {"type": "xml"}}, "response_format.type"),
        (
            {"messages": HI, "response_format": {"type": "json_schema"}},
            "response_format.json_schema",
        ),
        ({"messages": [*HI, {"role": "wizard", "content": "x"}]}, "messages[1].role"),
        ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"content": "x"}]}, "messages[0].role"),
        ({"messages": ["hi"]}, "messages[0]"),
        ({"messages": [{"role": "user"}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content"),
        ({"messages": [{"role": "tool", "content": "r"}]}, "messages[0].tool_call_id"),
        (
            {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
            "messages[0].content[0].type",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages[0].content[0].text",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"type": "function", "function": {"name": "f"}}],
                    }
                ]
            },
            "messages[0].tool_calls[0].id",
        ),
    ],
)
def test_every_refusal_names_its_field(body: dict[str, Any], param: str) -> None:
    """Each field that is wrong, or that no route here can honour, is a 400 naming it."""
    assert _refusal(body).param == param


@pytest.mark.parametrize("kind", ["input_audio", "file"])
def test_media_parts_are_refused_by_their_position(kind: str) -> None:
    """Audio and files are refused, never silently dropped: the param points at the part
    (`messages[2].content[1]`)."""
    part = {"type": kind, kind: {"url": "https://example.com/cat.png"}}
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "text", "text": "what is this?"}, part]},
    ]
    error = _refusal({"messages": messages})
    assert error.param == "messages[2].content[1]"
    assert kind in error.message and "text" in error.message


def test_a_users_image_is_kept_as_a_part_for_the_door_to_take() -> None:
    """An image in a user message is kept as an image_url block (`gateway.http.image_parts`
    stores it and leaves a reference); `detail` and other keys are not carried."""
    url = "data:image/png;base64,iVBORw0KGgo="
    part = {"type": "image_url", "image_url": {"url": url, "detail": "high"}}
    request = parse_chat_request(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}]}
    )
    assert request.messages[0]["content"] == [
        {"type": "text", "text": "hi"},
        {"type": "image_url", "image_url": {"url": url}},
    ]


@pytest.mark.parametrize(
    ("role", "url", "param"),
    [
        ("assistant", "https://example.com/a.png", "messages[0].content[0]"),
        ("user", "http://example.com/a.png", "messages[0].content[0].image_url.url"),
        ("user", "ftp://example.com/a.png", "messages[0].content[0].image_url.url"),
    ],
)
def test_images_elsewhere_or_by_other_urls_are_refused(role: str, url: str, param: str) -> None:
    """Only a user's images are taken, and only by data: or https:// URL."""
    part = {"type": "image_url", "image_url": {"url": url}}
    messages = [{"role": role, "content": [part]}]
    if role == "assistant":
        messages.append({"role": "user", "content": "and?"})
    assert _refusal({"messages": messages}).param == param


def test_harmless_fields_real_clients_send_are_accepted() -> None:
    """langchain, litellm and the openai SDK send these at their defaults; none changes the
    answer, so none is refused."""
    request = parse_chat_request(
        {
            "model": "gpt-4o",
            "messages": HI,
            "user": "alice",
            "metadata": {"trace": "1"},
            "store": False,
            "service_tier": "auto",
            "logprobs": False,
            "n": 1,
            "presence_penalty": 0,
            "frequency_penalty": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "prompt_cache_key": "k",
            "tools": [],
            "some_vendor_extension": {"x": 1},
        }
    )
    assert request.model == "gpt-4o" and request.user == "alice"
    assert request.stream and request.include_usage
    assert request.tools is None  # `tools: []` asks for nothing
    assert request.options == CallOptions()


def test_pass_through_fields_are_read_into_call_options() -> None:
    request = parse_chat_request(
        {
            "messages": HI,
            "tools": [TOOL],
            "tool_choice": {"type": "function", "function": {"name": "lookup"}},
            "parallel_tool_calls": False,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
            },
            "temperature": 0.2,
            "top_p": 0.9,
            "max_tokens": 99,
            "max_completion_tokens": 77,
            "stop": "END",
            "seed": 7,
        }
    )
    assert request.tools is not None and [t.name for t in request.tools] == ["lookup"]
    assert request.options == CallOptions(
        tool_choice="lookup",
        parallel_tool_calls=False,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
        },
        temperature=0.2,
        top_p=0.9,
        max_tokens=77,  # max_completion_tokens supersedes the deprecated max_tokens
        stop=("END",),
        seed=7,
    )


def test_messages_become_canonical_in_order() -> None:
    """developer is a system message; text parts become text blocks; a tool result takes its
    call's tool name; an assistant's tool calls keep their id and JSON arguments."""
    request = parse_chat_request(
        {
            "messages": [
                {"role": "developer", "content": "rules"},
                {"role": "user", "content": [{"type": "text", "text": "look it up"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q":1}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
            ]
        }
    )
    roles = [m["role"] for m in request.messages]
    assert roles == ["system", "user", "assistant", "tool"]
    assert request.messages[1]["content"] == [{"type": "text", "text": "look it up"}]
    assert request.messages[2]["tool_calls"][0]["function"] == {
        "name": "lookup",
        "arguments": '{"q":1}',
    }
    assert request.messages[3]["name"] == "lookup" and request.messages[3]["tool_call_id"] == "c1"


def test_a_non_object_body_is_refused() -> None:
    assert _refusal(["messages"]).param is None


@pytest.mark.parametrize(
    ("wire", "body", "param"),
    [
        ("anthropic", {"seed": 1}, "seed"),
        ("anthropic", {"temperature": 0.5}, "temperature"),
        ("anthropic", {"top_p": 0.5}, "top_p"),
        ("responses", {"stop": ["x"]}, "stop"),
        ("responses", {"seed": 3}, "seed"),
        ("codex_app_server", {"temperature": 0.1}, "temperature"),
    ],
)
def test_a_route_that_cannot_carry_a_field_refuses_it(
    wire: Any, body: dict[str, Any], param: str
) -> None:
    request = parse_chat_request({"messages": HI, **body})
    with pytest.raises(ApiError) as caught:
        refuse_unsupported(request, wire)
    assert caught.value.status == 400 and caught.value.param == param


def test_the_openai_chat_route_carries_every_field() -> None:
    request = parse_chat_request(
        {"messages": HI, "seed": 1, "stop": ["x"], "response_format": {"type": "json_object"}}
    )
    refuse_unsupported(request, "openai_chat")


def test_client_tools_are_refused_where_the_route_runs_its_own() -> None:
    """The codex app-server route runs its own agent loop: the client's tools cannot reach it."""
    from gateway.http.tool_proxy import checked_options

    request = parse_chat_request({"messages": HI, "tools": [TOOL]})
    with pytest.raises(ApiError) as caught:
        checked_options(request, "codex_app_server")
    assert caught.value.param == "tools"
    assert checked_options(request, "anthropic").client_tools == request.tools
