"""Fixtures for the Codex tests: a factory for app-server providers backed by the fake process."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent.codex.app_server import CodexAppServerProvider
from agent.providers.base import ProviderSettings
from tests.fakes import codex_app_server

FAKE_SCRIPT = Path(codex_app_server.__file__)

ProviderFactory = Callable[..., CodexAppServerProvider]


class ServerLog:
    """The messages the fake app-server received, read from its --log file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def messages(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def methods(self) -> list[str]:
        return [m["method"] for m in self.messages() if "method" in m]

    def params_of(self, method: str) -> list[dict[str, Any]]:
        return [m.get("params") or {} for m in self.messages() if m.get("method") == method]


@pytest.fixture
def server_log(tmp_path: Path) -> ServerLog:
    return ServerLog(tmp_path / "codex_rpc.jsonl")


@pytest.fixture
async def app_server(server_log: ServerLog) -> AsyncIterator[ProviderFactory]:
    """Build providers running the fake app-server with extra flags; all closed afterwards."""
    built: list[CodexAppServerProvider] = []

    def make(
        *flags: str, timeout_s: float = 5.0, request_timeout_s: float = 5.0
    ) -> CodexAppServerProvider:
        settings = ProviderSettings(
            provider="openai-codex",
            model="gpt-5.5",
            api_mode="codex_app_server",
            timeout_s=timeout_s,
        )
        command = [sys.executable, str(FAKE_SCRIPT), "--log", str(server_log.path), *flags]
        provider = CodexAppServerProvider(
            settings,
            command=command,
            request_timeout_s=request_timeout_s,
            compact_timeout_s=timeout_s,
        )
        built.append(provider)
        return provider

    yield make
    for provider in built:
        await provider.aclose()
