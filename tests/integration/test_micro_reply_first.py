"""The reply reaches the user before a micro pass starts: `hermes chat -q` with a slow summarizer."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import pytest

from agent.config import load_config
from agent.providers.base import ProviderRequest
from cli.chat_cmd import run_chat_once
from tests.fakes.provider import FakeProvider


class _Stdout:
    """Records what the CLI prints, as ordered events."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def write(self, text: str) -> int:
        self.events.append(f"printed:{text}")
        return len(text)

    def flush(self) -> None:
        pass


async def test_cli_prints_the_reply_before_the_summarizer_is_called(
    hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each turn's reply is fully printed before its micro pass calls the (slow) summarizer."""
    (hermes_home / "config.yaml").write_text(
        "model:\n  provider: custom\n  default: local-model\n  base_url: http://127.0.0.1:9/v1\n"
        "  api_key: test-key\n  context_length: 16000\n"
        "compression:\n  protect_first_n: 1\n  protect_last_n: 2\n  target_ratio: 0.05\n"
        "  micro_compact_when: always\n"
    )
    config = load_config(hermes_home / "config.yaml")
    events: list[str] = []

    async def respond(request: ProviderRequest) -> str:
        if "rolling summary" in str(request.messages[0]["content"]):
            events.append("summarizer_called")
            await asyncio.sleep(0.05)  # a slow auxiliary model
            return "## Goal\nrolling"
        return f"reply {len(events)}: " + "z" * 800

    fake = FakeProvider(responder=respond)
    monkeypatch.setattr("agent.providers.registry.build_provider", lambda *a, **k: fake)
    monkeypatch.setattr(sys, "stdout", _Stdout(events))
    session: str | None = None
    for i in range(10):
        args = argparse.Namespace(
            query=f"question {i}", json=False, model=None, resume=session, continue_=False
        )
        assert await run_chat_once(args, config, hermes_home, {}) == 0
        if session is None:
            from state import SqlSessionStore, default_url

            async with await SqlSessionStore.open(default_url(hermes_home)) as store:
                session = (await store.sessions.list_sessions(limit=1))[0].id
    calls = [i for i, e in enumerate(events) if e == "summarizer_called"]
    assert len(calls) >= 3
    for index in calls:
        printed = [e for e in events[:index] if e.startswith("printed:")]
        assert printed[-1] == "printed:\n"  # the reply, ended by its newline, came first
        assert printed[-2].startswith("printed:reply ")
