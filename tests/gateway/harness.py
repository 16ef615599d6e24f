"""Gateway test harness: a real `cli.runtime.Runtime` on FakeLLM and SQLite, plus recording sinks.

Shared by `tests/gateway/` and `tests/integration/test_gateway_*.py`.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent.config import HermesConfig
from gateway.platforms.base import ChatRef, InboundMessage, PlatformName
from sim.llm_server import FakeLLM, Turn
from tests.waits import WAIT_S

__all__ = [
    "RecordingSink",
    "free_port",
    "inbound",
    "is_summary_request",
    "make_config",
    "request_texts",
    "start_runtime",
    "summary_responder",
    "wait_listening",
]

MODEL = "test-model"
SUMMARY_MARK = "handoff summaries"
"""A phrase of the compressor's summary system prompt: tells summary calls from chat turns."""


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_listening(port: int, timeout_s: float = WAIT_S) -> None:
    """Until something accepts connections on the loopback `port`."""
    async with asyncio.timeout(timeout_s):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.02)
                continue
            writer.close()
            await writer.wait_closed()
            return


def make_config(fake: FakeLLM, db_path: Path, **sections: dict[str, Any]) -> HermesConfig:
    """A config on FakeLLM's Anthropic endpoint and a SQLite file; `sections` merge over it."""
    data: dict[str, Any] = {
        "model": {
            "provider": "anthropic",
            "default": MODEL,
            "base_url": fake.anthropic_base_url,
            "api_key": "test-key",
            "context_length": 100_000,
            "max_retries": 0,
            "timeout_s": 10.0,
        },
        "state": {"url": f"sqlite+aiosqlite:///{db_path}"},
        "tools": {"enabled": []},
        "compression": {"micro_compact": False},
        "auxiliary": {"compression": {"timeout_s": 10.0}},
        "gateway": {"shutdown_timeout_s": 5.0},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return HermesConfig.model_validate(data)


@asynccontextmanager
async def start_runtime(
    config: HermesConfig, home: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """A started `Runtime` for `config`, closed on exit."""
    from cli.runtime import Runtime

    runtime = await Runtime.start(config, home, {})
    try:
        yield runtime
    finally:
        await runtime.aclose()


def inbound(
    text: str,
    *,
    platform: PlatformName = "terminal",
    chat_id: str = "local",
    user_id: str = "u1",
    is_direct: bool = True,
) -> InboundMessage:
    return InboundMessage(
        chat=ChatRef(platform=platform, chat_id=chat_id),
        user_id=user_id,
        text=text,
        is_direct=is_direct,
    )


class RecordingSink:
    """A `ReplySink` that records everything the runner tells it."""

    streams = True

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.deltas: list[str] = []
        self.notices: list[str] = []
        self.final: str | None = None
        self.started = asyncio.Event()

    async def start(self, session_id: str) -> None:
        self.session_id = session_id
        self.started.set()

    async def on_text(self, delta: str) -> None:
        self.deltas.append(delta)

    async def notice(self, text: str) -> None:
        self.notices.append(text)

    async def finish(self, text: str) -> None:
        self.final = text


def request_texts(body: dict[str, Any] | None) -> list[str]:
    """Every text of a recorded Anthropic or OpenAI request body, in order (system included)."""
    if body is None:
        return []
    texts: list[str] = []
    system = body.get("system")
    if system:
        texts.extend(_texts(system))
    for message in body.get("messages") or ():
        texts.extend(_texts(message.get("content")))
    return texts


def is_summary_request(body: dict[str, Any]) -> bool:
    """True for the compressor's summary call, False for a chat turn."""
    return SUMMARY_MARK in json.dumps(body.get("system") or body.get("messages", [])[:1])


def summary_responder(
    summary: str = "## Goal\nKeep chatting.\n## Next Steps\nAnswer the newest question.",
    *,
    fail: bool = False,
) -> Callable[[dict[str, Any], str], Turn | None]:
    """A FakeLLM responder answering summary calls (or failing them); chat turns fall through."""

    def respond(body: dict[str, Any], api: str) -> Turn | None:
        if not is_summary_request(body):
            return None
        if fail:
            return Turn(error=(529, "overloaded_error", "overloaded"), retry_after_ms=1)
        return Turn(text=summary)

    return respond


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]
    return []
