"""Canonical <-> OpenAI Chat Completions conversion: pure tables, no SDK and no network."""

from __future__ import annotations

from typing import Any

import pytest

from agent.providers._convert_openai import (
    OpenAIStreamAccumulator,
    messages_to_openai,
    reply_from_openai,
    request_to_openai,
    stop_reason_from_openai,
)
from agent.providers.base import ProviderRequest, ToolSpec, Usage

EPH = {"type": "ephemeral"}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("message", "accepts", "expected"),
    [
        pytest.param(
            {"role": "user", "content": "hi", "_id": 4, "_persisted": True},
            False,
            {"role": "user", "content": "hi"},
            id="metadata-is-stripped",
        ),
        pytest.param(
            {"role": "user", "content": "hi", "cache_control": EPH},
            True,
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPH}]},
            id="marker-moves-onto-a-text-block",
        ),
        pytest.param(
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                "cache_control": EPH,
            },
            True,
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b", "cache_control": EPH},
                ],
            },
            id="marker-moves-onto-the-last-block",
        ),
        pytest.param(
            {
                "role": "user",
                "content": [{"type": "text", "text": "a", "cache_control": EPH}],
                "cache_control": EPH,
            },
            False,
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            id="markers-removed-where-not-accepted",
        ),
        pytest.param(
            {"role": "assistant", "content": None, "tool_calls": [CALL], "cache_control": EPH},
            True,
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            id="no-content-no-marker",
        ),
        pytest.param(
            {
                "role": "tool",
                "tool_call_id": "c1",
                "name": "f",
                "content": "out",
                "cache_control": EPH,
            },
            True,
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [{"type": "text", "text": "out", "cache_control": EPH}],
            },
            id="tool-result-marker-and-no-name",
        ),
        pytest.param(
            {
                "role": "user",
                "content": [{"type": "text", "text": ""}, {"type": "text", "text": "x"}],
            },
            False,
            {"role": "user", "content": [{"type": "text", "text": "x"}]},
            id="empty-blocks-dropped",
        ),
    ],
)
def test_messages_to_openai(message: Any, accepts: bool, expected: dict[str, Any]) -> None:
    """Messages lose metadata; cache markers move to the last block or vanish, by route."""
    assert messages_to_openai([message], accepts_cache_control=accepts) == [expected]


def test_request_to_openai_uses_the_chosen_max_tokens_key() -> None:
    """Tools become function tools; the max-tokens key follows the route; extra wins."""
    request = ProviderRequest(
        model="m",
        messages=[{"role": "user", "content": "q"}],
        tools=(ToolSpec(name="t", description="d", parameters={"type": "object"}),),
        max_tokens=10,
        extra={"seed": 1},
    )
    kwargs = request_to_openai(
        request, accepts_cache_control=False, max_tokens_key="max_completion_tokens"
    )
    assert kwargs == {
        "model": "m",
        "messages": [{"role": "user", "content": "q"}],
        "max_completion_tokens": 10,
        "tools": [
            {
                "type": "function",
                "function": {"name": "t", "description": "d", "parameters": {"type": "object"}},
            }
        ],
        "seed": 1,
    }


@pytest.mark.parametrize(
    ("raw", "has_calls", "expected"),
    [
        ("stop", False, "end"),
        ("stop", True, "tool_use"),
        ("tool_calls", True, "tool_use"),
        ("length", True, "max_tokens"),
        (None, False, "end"),
    ],
)
def test_stop_reason_from_openai(raw: str | None, has_calls: bool, expected: str) -> None:
    """finish_reason maps to end / tool_use / max_tokens; tool calls win over a plain stop."""
    assert stop_reason_from_openai(raw, has_tool_calls=has_calls) == expected


def test_reply_keeps_raw_arguments_and_invents_missing_ids() -> None:
    """Tool-call arguments pass through untouched (even invalid JSON); a missing id is invented."""
    reply = reply_from_openai(
        {
            "model": "m",
            "choices": [
                {
                    "message": {
                        "content": None,
                        "tool_calls": [{"id": "", "function": {"name": "f", "arguments": "{bad"}}],
                    },
                    "finish_reason": "stop",
                }
            ],
        }
    )
    assert reply.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{bad"}}
        ],
    }
    assert reply.stop_reason == "tool_use"


def test_stream_accumulator_joins_tool_call_deltas_by_index() -> None:
    """Interleaved tool-call deltas are joined per index; text deltas come back in order."""
    acc = OpenAIStreamAccumulator()
    chunks: list[dict[str, Any]] = [
        {
            "id": "x",
            "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        },
        {"choices": [{"index": 0, "delta": {"content": "Hi "}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y"'}}
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"x": 1}'}}]},
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 1, "function": {"arguments": ": 2}"}}]},
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 9,
                "completion_tokens": 4,
                "prompt_tokens_details": {"cached_tokens": 8},
            },
        },
    ]
    deltas = [d for c in chunks if (d := acc.add(c))]
    reply = reply_from_openai(acc.completion())
    assert deltas == ["Hi "]
    assert [(c["id"], c["function"]["arguments"]) for c in reply.message["tool_calls"]] == [
        ("a", '{"x": 1}'),
        ("b", '{"y": 2}'),
    ]
    assert reply.usage == Usage(input_tokens=1, output_tokens=4, cache_read_tokens=8)
    assert reply.model == "m"
