"""Canonical <-> Anthropic conversion: pure tables, no SDK and no network."""

from __future__ import annotations

from typing import Any

import pytest

from agent.providers._convert_anthropic import (
    AnthropicStreamAccumulator,
    messages_to_anthropic,
    reply_from_anthropic,
    request_to_anthropic,
    stop_reason_from_anthropic,
    system_to_anthropic,
)
from agent.providers.base import ProviderRequest, ToolSpec, Usage

EPH = {"type": "ephemeral"}


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param(
            [{"role": "user", "content": "hi"}],
            [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            id="string-content-becomes-a-text-block",
        ),
        pytest.param(
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_call("t1", "a", "{}"), _call("t2", "b", '{"x":1}')],
                },
                {"role": "tool", "tool_call_id": "t1", "name": "a", "content": "r1"},
                {"role": "tool", "tool_call_id": "t2", "name": "b", "content": "r2"},
                {"role": "user", "content": "next"},
            ],
            [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
                        {"type": "tool_use", "id": "t2", "name": "b", "input": {"x": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "r1"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "r2"},
                        {"type": "text", "text": "next"},
                    ],
                },
            ],
            id="tool-results-merge-into-one-user-message",
        ),
        pytest.param(
            [
                {"role": "user", "content": "a"},
                {"role": "user", "content": [{"type": "text", "text": "b"}]},
            ],
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                }
            ],
            id="consecutive-user-messages-merge",
        ),
        pytest.param(
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": ""}, {"type": "text", "text": "x"}],
                },
                {"role": "assistant", "content": ""},
                {"role": "user", "content": "y"},
            ],
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
                }
            ],
            id="empty-blocks-and-empty-messages-are-dropped",
        ),
        pytest.param(
            [{"role": "assistant", "content": "ok", "tool_calls": [_call("t1", "a", "{not json")]}],
            [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "ok"},
                        {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
                    ],
                }
            ],
            id="invalid-tool-arguments-become-an-empty-object",
        ),
        pytest.param(
            [{"role": "tool", "tool_call_id": "t1", "content": "", "cache_control": EPH}],
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "cache_control": EPH}],
                }
            ],
            id="message-marker-goes-on-the-tool-result-block",
        ),
        pytest.param(
            [
                {
                    "role": "assistant",
                    "content": "t",
                    "tool_calls": [_call("t1", "a", "{}")],
                    "cache_control": EPH,
                }
            ],
            [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "t"},
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "a",
                            "input": {},
                            "cache_control": EPH,
                        },
                    ],
                }
            ],
            id="message-marker-goes-on-the-last-tool-use-block",
        ),
        pytest.param(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "k", "cache_control": EPH},
                        {"type": "text", "text": ""},
                    ],
                }
            ],
            [{"role": "user", "content": [{"type": "text", "text": "k", "cache_control": EPH}]}],
            id="block-markers-are-kept",
        ),
        pytest.param(
            [
                {"role": "assistant", "content": "", "cache_control": EPH},
                {"role": "user", "content": "q"},
            ],
            [{"role": "user", "content": [{"type": "text", "text": "q"}]}],
            id="empty-message-drops-its-marker",
        ),
    ],
)
def test_messages_to_anthropic(messages: list[Any], expected: list[Any]) -> None:
    """Canonical messages become alternating block messages with markers where Anthropic takes them."""
    assert messages_to_anthropic(messages) == expected


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        pytest.param([{"role": "system", "content": "be brief"}], "be brief", id="plain-string"),
        pytest.param(
            [{"role": "system", "content": "a"}, {"role": "system", "content": "b"}],
            "a\n\nb",
            id="joined",
        ),
        pytest.param(
            [{"role": "system", "content": [{"type": "text", "text": "s", "cache_control": EPH}]}],
            [{"type": "text", "text": "s", "cache_control": EPH}],
            id="blocks-when-a-marker-is-present",
        ),
        pytest.param(
            [
                {
                    "role": "system",
                    "content": "s",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"},
                }
            ],
            [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            id="message-marker-on-system",
        ),
        pytest.param([], "", id="no-system"),
    ],
)
def test_system_to_anthropic(system: list[Any], expected: object) -> None:
    """System messages become the `system` parameter, as blocks only when one carries a marker."""
    assert system_to_anthropic(system) == expected


def test_request_merges_extra_and_maps_tools() -> None:
    """The request carries tools as input_schema, omits an empty system, and lets `extra` win."""
    request = ProviderRequest(
        model="m",
        messages=[{"role": "user", "content": "hi", "_id": 3}],
        tools=(ToolSpec(name="t", description="d", parameters={"type": "object"}),),
        max_tokens=50,
        temperature=0.2,
        extra={"max_tokens": 99, "metadata": {"user_id": "u"}},
    )
    assert request_to_anthropic(request) == {
        "model": "m",
        "max_tokens": 99,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
        "temperature": 0.2,
        "metadata": {"user_id": "u"},
    }


def test_reply_from_anthropic_maps_text_tools_and_usage() -> None:
    """A reply's text is joined, tool_use becomes compact JSON tool_calls, cache usage is mapped."""
    reply = reply_from_anthropic(
        {
            "id": "msg_1",
            "model": "m",
            "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": "Let me "},
                {"type": "text", "text": "check."},
                {"type": "tool_use", "id": "tu1", "name": "w", "input": {"city": "Zürich", "n": 1}},
            ],
            "usage": {
                "input_tokens": 5,
                "output_tokens": 7,
                "cache_creation_input_tokens": 11,
                "cache_read_input_tokens": 13,
            },
        }
    )
    assert reply.message == {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [_call("tu1", "w", '{"city":"Zürich","n":1}')],
    }
    assert reply.usage == Usage(
        input_tokens=5, output_tokens=7, cache_write_tokens=11, cache_read_tokens=13
    )
    assert reply.stop_reason == "tool_use"


def test_reply_with_only_tool_calls_has_no_content() -> None:
    """An assistant message that only calls tools has content None, as the OpenAI form wants."""
    reply = reply_from_anthropic(
        {
            "content": [{"type": "tool_use", "id": "a", "name": "n", "input": {}}],
            "stop_reason": "tool_use",
        }
    )
    assert reply.message["content"] is None


@pytest.mark.parametrize(
    ("raw", "has_calls", "expected"),
    [
        ("end_turn", False, "end"),
        ("stop_sequence", False, "end"),
        ("tool_use", True, "tool_use"),
        ("max_tokens", False, "max_tokens"),
        ("refusal", False, "end"),
        (None, True, "tool_use"),
        ("something_new", False, "end"),
    ],
)
def test_stop_reason_from_anthropic(raw: str | None, has_calls: bool, expected: str) -> None:
    """Anthropic stop reasons map onto end / tool_use / max_tokens."""
    assert stop_reason_from_anthropic(raw, has_tool_calls=has_calls) == expected


def test_stream_accumulator_folds_events_and_tolerates_bad_json() -> None:
    """Stream events fold into a message; deltas come back in order; bad tool JSON becomes {}."""
    acc = AnthropicStreamAccumulator()
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "m1",
                "model": "m",
                "content": [],
                "usage": {"input_tokens": 3, "cache_read_input_tokens": 2, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "b"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"x": '},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "u", "name": "n", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"y": 2}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    deltas = [d for e in events if (d := acc.add(e))]
    reply = reply_from_anthropic(acc.message)
    assert deltas == ["a ", "b"]
    assert reply.message["content"] == "a b"
    assert [c["function"]["arguments"] for c in reply.message["tool_calls"]] == ["{}", '{"y":2}']
    assert reply.usage == Usage(input_tokens=3, output_tokens=9, cache_read_tokens=2)
    assert reply.stop_reason == "tool_use"


def test_image_url_parts_become_native_image_blocks() -> None:
    """An OpenAI-style `image_url` part (what `agent.media` attaches) is an Anthropic image
    block: base64 with its media type for a data URL, `url` otherwise (Messages API, Vision)."""
    from agent.providers._convert_anthropic import messages_to_anthropic

    data = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    broken = {"type": "image_url", "image_url": {"url": "data:image/png,notbase64"}}
    message = {"role": "user", "content": [{"type": "text", "text": "look"}, data, remote, broken]}
    (converted,) = messages_to_anthropic([message])  # type: ignore[list-item]
    assert converted["content"] == [
        {"type": "text", "text": "look"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
    ]
