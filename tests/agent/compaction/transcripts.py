"""Transcript builders shared by the compaction tests (not a test module)."""

from __future__ import annotations

import json
from itertools import count

from agent.messages import (
    ChatMessage,
    ToolCall,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)

_ids = count(1)


def call(name: str, **args: object) -> ToolCall:
    """A tool call with a fresh id."""
    return {
        "id": f"call_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def exchange(name: str, output: str, **args: object) -> list[ChatMessage]:
    """An assistant tool call and its result."""
    c = call(name, **args)
    return [assistant_message(None, [c]), tool_message(c["id"], name, output)]


def persisted(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Stamp messages as stored rows, as a resumed session would have them."""
    for row_id, msg in enumerate(messages, start=1):
        msg["_id"] = row_id
        msg["_persisted"] = True
    return messages


def worked_example() -> list[ChatMessage]:
    """The seed's 45-message FastAPI session, about 95K tokens of a 200K window."""
    msgs: list[ChatMessage] = [
        system_message("You are a helpful assistant. " * 20),
        user_message("Help me set up a FastAPI project"),
        *exchange("terminal", "directory created", command="mkdir project"),
        *exchange("write_file", "file written (2.3KB)", path="main.py"),
    ]
    for step in range(16):  # 32 messages of file editing, testing, debugging
        body = f"line {step}: " + "def handler(request): return compute(request)\n" * 480
        msgs += exchange("read_file", body, path=f"app/module_{step}.py")
    msgs += exchange(
        "terminal", "8 passed, 2 failed\n" + "E   AssertionError\n" * 270, command="pytest"
    )
    msgs.append(user_message("Fix the failing tests"))
    msgs += exchange("read_file", "import pytest\n" + "x = 1\n" * 500, path="tests/test_api.py")
    msgs.append(assistant_message("I see the issue with the test fixtures..."))
    msgs.append(user_message("Great, also add error handling"))
    return msgs
