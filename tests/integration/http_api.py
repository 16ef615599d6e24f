"""A started HTTP API on FakeLLM for the HTTP surface tests: config sections merge over the
harness's, the openai SDK and a raw aiohttp session both point at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from gateway.http import HttpApiServer
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM
from tests.gateway.harness import make_config, start_runtime
from tests.waits import WAIT_S

KEY = "sk-hermes-test"


@dataclass(slots=True)
class Served:
    llm: FakeLLM
    server: HttpApiServer
    runner: GatewayRunner
    runtime: Any
    http: aiohttp.ClientSession
    """Raw requests, no key unless a test adds one."""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def client(self, key: str = KEY, *, timeout_s: float = WAIT_S) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=key, base_url=f"{self.base}/v1", max_retries=0, timeout=timeout_s
        )

    @staticmethod
    def auth(key: str = KEY) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def serve(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    api_key: str | None = KEY,
    environ: Mapping[str, str] | None = None,
    llm: FakeLLM | None = None,
    **sections: dict[str, Any],
) -> AsyncIterator[Served]:
    """The HTTP API over a runtime on FakeLLM (a fresh one unless `llm` is given)."""
    if llm is None:
        async with (
            FakeLLM() as fresh,
            serve(
                tmp_path, monkeypatch, api_key=api_key, environ=environ, llm=fresh, **sections
            ) as served,
        ):
            yield served
        return
    config = make_config(llm, tmp_path / "state.db", **sections)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        server = HttpApiServer(
            runner, host="127.0.0.1", port=0, api_key=api_key, environ=dict(environ or {})
        )
        await server.start()
        timeout = aiohttp.ClientTimeout(total=WAIT_S)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http:
                yield Served(llm=llm, server=server, runner=runner, runtime=runtime, http=http)
        finally:
            await server.stop()
            await runner.stop()


def envelope_of(body: Any) -> dict[str, Any]:
    """The OpenAI error envelope's inner object, asserting its shape (OpenAI API reference,
    "Error codes": `{"error": {"message", "type", "param", "code"}}`)."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert "pydantic" not in error["message"] and "Traceback" not in error["message"]
    return dict(error)
