"""The OpenAI Chat Completions wire of FakeLLM, judged by the real openai SDK: usage and refusals."""

from __future__ import annotations

import re
from typing import Any

import openai
import pytest

from sim.llm_server import FakeLLM
from tests.sim.llm_server.clients import openai_client


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([{"role": "user", "content": "x", "_id": 1}], "Additional properties"),
        ([{"role": "tool", "tool_call_id": "c", "content": "x"}], "must be a response"),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "x"},
            ],
            "must be followed by tool messages",
        ),
    ],
)
async def test_openai_strictness(fake: FakeLLM, messages: Any, fragment: str) -> None:
    """Metadata keys and unpaired tool messages get the 400 the real API gives."""
    with pytest.raises(openai.BadRequestError, match=fragment):
        await openai_client(fake).chat.completions.create(model="m", messages=messages)


async def test_openai_usage_only_with_include_usage(fake: FakeLLM) -> None:
    """A stream carries usage only when asked, as a last chunk with no choices; cached tokens grow."""
    client = openai_client(fake)
    plain = [
        c
        async for c in await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "abcd"}], stream=True
        )
    ]
    assert all(c.usage is None for c in plain)
    asked = [
        c
        async for c in await client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "abcd"},
                {"role": "assistant", "content": "x"},
                {"role": "user", "content": "efgh"},
            ],
            stream=True,
            stream_options={"include_usage": True},
        )
    ]
    assert asked[-1].choices == [] and asked[-1].usage is not None
    assert asked[-1].usage.prompt_tokens == 3
    assert asked[-1].usage.prompt_tokens_details.cached_tokens == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("body", "param", "fragment"),
    [
        (
            {
                "messages": [{"role": "user", "content": "x"}],
                "stream_options": {"include_usage": True},
            },
            "stream_options",
            "only allowed when 'stream' is enabled",
        ),
        (
            {"messages": [{"role": "robot", "content": "x"}]},
            "messages[0].role",
            "Invalid value: 'robot'",
        ),
        ({"messages": ["hello"]}, "messages[0]", "expected an object"),
        (
            {"messages": [{"role": "user", "content": ["hi"]}]},
            "messages[0].content[0]",
            "expected an object",
        ),
        ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content", "string or array"),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "content": None, "tool_calls": [{"type": "function"}]},
                ]
            },
            "messages[1].tool_calls[0].id",
            "Missing required parameter",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
            "tools[0].function",
            "Missing required parameter",
        ),
    ],
)
async def test_malformed_requests_get_the_real_400(
    fake: FakeLLM, body: dict[str, Any], param: str, fragment: str
) -> None:
    """Shapes Chat Completions refuses get a 400 naming the parameter, never a crash (platform.openai.com/docs/api-reference/chat/create)."""
    with pytest.raises(openai.BadRequestError, match=re.escape(fragment)) as caught:
        await openai_client(fake).chat.completions.create(model="m", **body)
    assert caught.value.param == param
    assert caught.value.type == "invalid_request_error"
    assert fake.usages == []
