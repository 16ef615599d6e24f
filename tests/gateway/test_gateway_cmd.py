"""`hermes gateway run`: starts the HTTP API, and SIGTERM drains turns in flight, saves, returns 0."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import aiohttp
import pytest

from agent.errors import ConfigError
from cli.gateway_cmd import run_gateway
from sim.llm_server import FakeLLM, Turn
from state import SqlSessionStore
from tests.gateway.harness import (
    MODEL,
    free_port,
    make_config,
    start_runtime,
    wait_listening,
)
from tests.waits import WAIT_S

KEY = "sk-gateway"


@pytest.mark.parametrize("how", ["sigterm", "stop-event"])
async def test_sigterm_finishes_the_turn_in_flight_saves_and_returns_0(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A stop request while a turn runs lets it answer its caller and persist, then exits 0."""
    port = free_port()
    config = make_config(
        llm, db_path, gateway={"http": {"enabled": True, "port": port, "api_key": KEY}}
    )
    async with start_runtime(config, tmp_path, monkeypatch):
        pass  # applies the harness shims for Runtime.start inside run_gateway
    stop = asyncio.Event()
    llm.script(Turn(text="finished despite the shutdown", delay_s=0.3))
    gateway = asyncio.create_task(run_gateway(config, tmp_path, {}, stop=stop))
    await wait_listening(port)
    async with aiohttp.ClientSession() as http:
        request = asyncio.create_task(
            http.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": MODEL, "messages": [{"role": "user", "content": "slow one"}]},
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=aiohttp.ClientTimeout(total=WAIT_S),
            )
        )
        await llm.wait_requests(1)
        if how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            stop.set()
        async with asyncio.timeout(WAIT_S):
            response = await request
            body = await response.json()
            code = await gateway
    assert code == 0
    assert response.status == 200
    assert body["choices"][0]["message"]["content"] == "finished despite the shutdown"
    async with await SqlSessionStore.open(config.state.url) as store:
        rows = await store.transcript.load_active(response.headers["X-Hermes-Session-Id"])
    assert [m["content"] for m in rows[-2:]] == ["slow one", "finished despite the shutdown"]


async def test_gateway_without_any_platform_is_a_config_error(
    llm: FakeLLM, db_path: Path, tmp_path: Path
) -> None:
    """With nothing enabled, `hermes gateway run` says which keys to set instead of idling."""
    with pytest.raises(ConfigError, match="gateway.http.enabled"):
        await run_gateway(make_config(llm, db_path), tmp_path, {})


async def test_terminal_chat_refuses_an_unknown_resume_id(
    llm: FakeLLM, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hermes chat --resume nope` exits 2 with a sentence, before any prompt or model call."""
    from cli.gateway_cmd import run_terminal_chat

    code = await run_terminal_chat(make_config(llm, db_path), tmp_path, {}, resume="nope")
    assert code == 2
    assert "no session 'nope'" in capsys.readouterr().err
    assert llm.requests == []


async def test_gateway_prints_where_it_listens(
    llm: FakeLLM, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On start, each enabled platform gets one line: the HTTP API its full address."""
    port = free_port()
    config = make_config(
        llm, db_path, gateway={"http": {"enabled": True, "port": port, "api_key": KEY}}
    )
    stop = asyncio.Event()
    gateway = asyncio.create_task(run_gateway(config, tmp_path, {}, stop=stop))
    await wait_listening(port)
    stop.set()
    async with asyncio.timeout(WAIT_S):
        assert await gateway == 0
    err = capsys.readouterr().err
    assert f"  http: http://127.0.0.1:{port}/v1 (OpenAI-compatible" in err


async def test_a_busy_port_is_one_sentence(llm: FakeLLM, db_path: Path, tmp_path: Path) -> None:
    """Another program on the HTTP port: a ConfigError naming the port and the key to change
    (the CLI prints it as one line), and nothing is left running."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = make_config(
            llm, db_path, gateway={"http": {"enabled": True, "port": port, "api_key": KEY}}
        )
        with pytest.raises(ConfigError) as caught:
            async with asyncio.timeout(WAIT_S):
                await run_gateway(config, tmp_path, {}, stop=asyncio.Event())
    message = str(caught.value)
    assert f"port {port} on 127.0.0.1 is already in use" in message
    assert "gateway.http.port" in message and "\n" not in message
