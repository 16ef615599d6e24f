"""Two runners on one store (two workers): routes, `/new`, `/model` and the turn lock are the
store's, never one process's memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from gateway.failures import BUSY_REPLY
from gateway.http import SESSION_HEADER, HttpApiServer
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.run import BUSY_NOTICE, GatewayRunner
from sim.llm_server import FakeLLM
from state import SqlSessionStore
from tests.gateway.harness import (
    MODEL,
    RecordingSink,
    inbound,
    make_config,
    request_texts,
    start_runtime,
)
from tests.state.fixtures import shared_db_url
from tests.waits import WAIT_S

__all__ = ["shared_db_url"]

KEY = "sk-workers"


class _NoticedSink(RecordingSink):
    """Records like RecordingSink; `noticed` is set by the first notice."""

    def __init__(self) -> None:
        super().__init__()
        self.noticed = asyncio.Event()

    async def notice(self, text: str) -> None:
        await super().notice(text)
        self.noticed.set()


@dataclass(slots=True)
class _Cluster:
    llm: FakeLLM
    runners: list[GatewayRunner]
    url: str

    async def say(self, worker: int, text: str, sink: RecordingSink | None = None) -> str:
        async with asyncio.timeout(WAIT_S * 2):
            outcome = await self.runners[worker].submit(inbound(text), sink or RecordingSink())
        return outcome.session_id


@pytest.fixture
async def cluster(
    shared_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[_Cluster]:
    async with FakeLLM() as llm, AsyncExitStack() as stack:
        state = {"url": shared_db_url, "lease_ttl_s": 1.0, "lock_timeout_s": 0.5}
        config = make_config(llm, tmp_path / "unused.db", state=state)
        runners = []
        for i in range(2):
            home = tmp_path / f"w{i}"
            home.mkdir()
            runtime = await stack.enter_async_context(start_runtime(config, home, monkeypatch))
            runner = GatewayRunner(runtime)
            stack.push_async_callback(runner.stop)
            runners.append(runner)
        yield _Cluster(llm=llm, runners=runners, url=shared_db_url)


async def test_new_on_one_worker_moves_the_chat_on_the_other(cluster: _Cluster) -> None:
    """A chat routed on both workers, `/new` on one: the other's next message lands in the new
    session (its cached route is checked against the store) and sees none of the old one."""
    first = await cluster.say(0, "hello from before")
    assert await cluster.say(1, "same chat, other worker") == first
    fresh = await cluster.say(0, "/new")
    assert fresh != first
    assert await cluster.say(1, "after the new session") == fresh
    texts = request_texts(cluster.llm.requests[-1].json)
    assert "after the new session" in texts and "hello from before" not in texts


async def test_a_model_switch_on_one_worker_reaches_the_other(cluster: _Cluster) -> None:
    """`/model` on one worker: the other worker's cached agent uses that model next."""
    await cluster.say(1, "warm up worker two")
    await cluster.say(0, "/model other-model")
    await cluster.say(1, "which model now?")
    assert cluster.llm.requests[-1].json is not None
    assert cluster.llm.requests[-1].json["model"] == "other-model"


async def test_a_busy_session_says_queued_then_answers(cluster: _Cluster) -> None:
    """While another worker holds the session's turn, a message is told "busy, queued" and is
    answered once that turn ends, after it."""
    session = await cluster.say(0, "start")
    async with await SqlSessionStore.open(cluster.url) as elsewhere:
        sink = _NoticedSink()
        async with elsewhere.locks.lock_session(session, timeout_s=1):
            pending = cluster.runners[1].submit(inbound("queued message"), sink)
            async with asyncio.timeout(WAIT_S):
                await sink.noticed.wait()
            assert not pending.done()
        async with asyncio.timeout(WAIT_S):
            outcome = await pending
    assert sink.notices == [BUSY_NOTICE]
    assert (outcome.reply, outcome.session_id, outcome.busy) == (
        "echo: queued message",
        session,
        False,
    )


async def test_busy_past_the_bound_is_refused_and_changes_nothing(cluster: _Cluster) -> None:
    """A session busy for longer than `state.lock_timeout_s`: the message is refused with a
    clear reply (HTTP: 409) and nothing of it is stored."""
    session = await cluster.say(0, "start")
    over_http = InboundMessage(  # the HTTP key's own session (a key continues only its own)
        chat=ChatRef(platform="http", chat_id="api"),
        user_id="api",
        text="start",
        is_direct=True,
        credential="default",
    )
    api_session = (await cluster.runners[0].submit(over_http, RecordingSink())).session_id
    async with await SqlSessionStore.open(cluster.url) as elsewhere:
        before = await elsewhere.transcript.show(session, include_archived=True)
        api_before = await elsewhere.transcript.show(api_session, include_archived=True)
        async with (
            elsewhere.locks.lock_session(session, timeout_s=1),
            elsewhere.locks.lock_session(api_session, timeout_s=1),
        ):
            outcome = await cluster.runners[1].submit(inbound("too late"), RecordingSink())
            server = HttpApiServer(cluster.runners[1], host="127.0.0.1", port=0, api_key=KEY)
            await server.start()
            client = openai.AsyncOpenAI(
                api_key=KEY, base_url=f"http://127.0.0.1:{server.port}/v1", max_retries=0
            )
            try:
                with pytest.raises(openai.ConflictError) as caught:
                    await client.chat.completions.create(
                        model=MODEL,
                        messages=[{"role": "user", "content": "also too late"}],
                        extra_headers={SESSION_HEADER: api_session},
                        timeout=WAIT_S,
                    )
            finally:
                await client.close()
                await server.stop()
        assert await elsewhere.transcript.show(session, include_archived=True) == before
        assert await elsewhere.transcript.show(api_session, include_archived=True) == api_before
    assert (outcome.reply, outcome.busy) == (BUSY_REPLY, True)
    assert caught.value.status_code == 409
