"""End to end: the real openai SDK against our HTTP API, the runner, and a Runtime on FakeLLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from agent.errors import ConfigError
from gateway.http import SESSION_HEADER, HttpApiServer
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import make_config, request_texts, start_runtime
from tests.waits import WAIT_S

KEY = "sk-hermes-test"


@dataclass(slots=True)
class Api:
    client: openai.AsyncOpenAI
    llm: FakeLLM
    server: HttpApiServer
    runner: GatewayRunner

    def client_with(self, key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=key, base_url=self.client.base_url, max_retries=0, timeout=WAIT_S
        )


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    """A runtime on FakeLLM behind HttpApiServer on a free port, and an openai client for it."""
    async with FakeLLM() as llm:
        config = make_config(llm, tmp_path / "state.db")
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
            await server.start()
            client = openai.AsyncOpenAI(
                api_key=KEY,
                base_url=f"http://127.0.0.1:{server.port}/v1",
                max_retries=0,
                timeout=WAIT_S,
            )
            try:
                yield Api(client=client, llm=llm, server=server, runner=runner)
            finally:
                await client.close()
                await server.stop()
                await runner.stop()


async def _ask(api: Api, text: str, session_id: str | None = None) -> tuple[str, str]:
    headers = {SESSION_HEADER: session_id} if session_id else {}
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model",
        messages=[{"role": "user", "content": text}],
        extra_headers=headers,
    )
    completion = raw.parse()
    return completion.choices[0].message.content or "", raw.headers[SESSION_HEADER]


async def test_non_streaming_reply_names_its_session(api: Api) -> None:
    """A plain completion returns the model's reply, usage, and the session id header."""
    api.llm.script(Turn(text="Hello from Hermes."))
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model", messages=[{"role": "user", "content": "hi"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from Hermes."
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert raw.headers[SESSION_HEADER]


async def test_streaming_reply_arrives_in_chunks_with_usage(api: Api) -> None:
    """stream=True yields content deltas that add up to the reply, then a usage chunk."""
    api.llm.script(Turn(text="one two three four"))
    stream = await api.client.chat.completions.create(
        model="test-model",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, usage, finish = [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(pieces) == "one two three four"
    assert len([p for p in pieces if p]) > 1
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens > 0


async def test_stream_helper_and_session_header_on_streams(api: Api) -> None:
    """The SDK's stream helper works, and a streamed response also carries the session id."""
    async with api.client.chat.completions.stream(
        model="test-model", messages=[{"role": "user", "content": "ping"}]
    ) as stream:
        final = await stream.get_final_completion()
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model", messages=[{"role": "user", "content": "pong"}], stream=True
    )
    texts = [c.choices[0].delta.content or "" async for c in raw.parse() if c.choices]
    assert final.choices[0].message.content == "echo: ping"
    assert "".join(texts) == "echo: pong"
    assert raw.headers[SESSION_HEADER]


async def test_session_header_continues_a_session(api: Api) -> None:
    """X-Hermes-Session-Id makes the next request continue that session's history."""
    _, session_id = await _ask(api, "remember 42")
    reply, same = await _ask(api, "what number?", session_id)
    _, other = await _ask(api, "what number?")
    assert same == session_id and other != session_id
    assert reply == "echo: what number?"
    texts = request_texts(api.llm.requests[1].json)
    assert texts[-3:] == ["remember 42", "echo: remember 42", "what number?"]
    assert "remember 42" not in request_texts(api.llm.requests[2].json)


async def test_requests_on_one_session_are_answered_in_order(api: Api) -> None:
    """Two concurrent requests on one session run one after the other, the second seeing the first."""
    _, session_id = await _ask(api, "start")
    api.llm.script(Turn(text="slow answer", delay_s=0.3), Turn(text="quick answer"))
    first = asyncio.create_task(_ask(api, "first", session_id))
    await api.llm.wait_requests(2)
    second = asyncio.create_task(_ask(api, "second", session_id))
    async with asyncio.timeout(WAIT_S):
        replies = [(await first)[0], (await second)[0]]
    assert replies == ["slow answer", "quick answer"]
    assert request_texts(api.llm.requests[-1].json)[-3:] == ["first", "slow answer", "second"]


async def test_unknown_session_is_a_404_naming_the_header(api: Api) -> None:
    """A session id the store does not know is refused rather than silently started: a 404 in
    the OpenAI envelope naming the header (issue 24: the very answer another key's session
    gets, so a key cannot tell the two apart); the model is not called."""
    with pytest.raises(openai.NotFoundError) as caught:
        await _ask(api, "hello?", "20990101_000000_deadbeef")
    assert caught.value.param == SESSION_HEADER  # type: ignore[attr-defined]
    assert caught.value.code == "session_not_found"  # type: ignore[attr-defined]
    assert api.llm.requests == []


@pytest.mark.parametrize("key", ["", "wrong-key"])
async def test_bearer_key_is_required(api: Api, key: str) -> None:
    """Without the right bearer key every endpoint answers 401 and the model is never called."""
    client = api.client_with(key or "x")
    if not key:
        client = openai.AsyncOpenAI(
            api_key="unused",
            base_url=api.client.base_url,
            max_retries=0,
            default_headers={"Authorization": ""},
        )
    with pytest.raises(openai.AuthenticationError):
        await client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.AuthenticationError):
        await client.models.list()
    await client.close()
    assert api.llm.requests == []


async def test_server_refuses_to_start_without_a_key(api: Api) -> None:
    """An HTTP API without a key is a configuration error, not an open door."""
    with pytest.raises(ConfigError, match="api_key"):
        HttpApiServer(api.runner, host="127.0.0.1", port=0, api_key=None, environ={})


async def test_models_lists_the_configured_model(api: Api) -> None:
    """GET /v1/models lists the runtime's model in the OpenAI shape."""
    models = await api.client.models.list()
    assert [m.id for m in models.data] == ["test-model"]


async def test_commands_work_over_http(api: Api) -> None:
    """A chat command sent as the user message is answered by the gateway, not the model."""
    _, session_id = await _ask(api, "hello")
    reply, _ = await _ask(api, "/status", session_id)
    assert f"Session {session_id}" in reply
    assert len(api.llm.requests) == 1


async def test_chat_commands_work_over_http_too(api: Api) -> None:
    """/title names the session the header points at, /new hands back a new session id, and
    an unknown command is answered locally: the same commands as every platform."""
    _, session_id = await _ask(api, "remember the number 7")
    titled, same = await _ask(api, "/title Numbers", session_id)
    assert same == session_id and titled == f"Session {session_id} is now called “Numbers”."
    started, fresh = await _ask(api, "/new", session_id)
    assert fresh != session_id and started.startswith(f"Started a new session ({fresh})")
    unknown, _ = await _ask(api, "/titel x", fresh)
    assert unknown.startswith("Unknown command /titel. Did you mean /title?")
    info = await api.runner.store.sessions.get_session(session_id)
    assert info is not None and info.title == "Numbers"
    assert len(api.llm.requests) == 1
