"""Stateless clients across two real `hermes gateway run` workers on one store (a shared SQLite
file, or a fresh PostgreSQL database with HERMES_TEST_PG_URL): prefix recognition is the
store's, so a conversation alternating between workers stays one session, and two requests
extending one head on different workers at once never share a context."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.http import SESSION_HEADER
from sim.llm_server import FakeLLM, Turn
from state import SqlSessionStore
from tests.gateway.harness import free_port
from tests.integration.workers import running_workers, worker_config
from tests.state.fixtures import shared_db_url
from tests.waits import SLOW_WAIT_S

__all__ = ["shared_db_url"]


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


async def _send(client: openai.AsyncOpenAI, messages: list[dict[str, Any]]) -> tuple[str, str]:
    async with asyncio.timeout(SLOW_WAIT_S):
        raw = await client.chat.completions.with_raw_response.create(
            model="test-model",
            messages=messages,  # type: ignore[arg-type]
        )
    return raw.parse().choices[0].message.content or "", raw.headers[SESSION_HEADER]


def _users(body: dict[str, Any] | None) -> list[str]:
    return [m["content"] for m in (body or {}).get("messages", []) if m.get("role") == "user"]


async def test_a_stateless_conversation_alternating_workers_is_one_session(
    shared_db_url: str, llm: FakeLLM, tmp_path: Path
) -> None:
    """20 requests, each to the other worker: one stored session, every model call carries
    every user message once; then two requests extending the same reply at once, one per
    worker: two sessions, each model call with only its own new message."""
    configs = [
        worker_config(
            llm_url=llm.openai_base_url, db_url=shared_db_url, port=free_port(), lease_ttl_s=1.5
        )
        for _ in range(2)
    ]
    async with running_workers(tmp_path, configs) as workers:
        clients = [w.client() for w in workers]
        try:
            messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
            sessions = set()
            for i in range(20):
                messages.append({"role": "user", "content": f"q{i}"})
                reply, session_id = await _send(clients[i % 2], messages)
                messages.append({"role": "assistant", "content": reply})
                sessions.add(session_id)
                assert _users(llm.requests[-1].json) == [f"q{k}" for k in range(i + 1)]
            assert len(sessions) == 1
            llm.script(Turn(text="slow", delay_s=0.5), Turn(text="fast"))
            before = len(llm.requests)
            forks = await asyncio.gather(
                _send(clients[0], [*messages, {"role": "user", "content": "left"}]),
                _send(clients[1], [*messages, {"role": "user", "content": "right"}]),
            )
            assert len({s for _, s in forks}) == 2 and sessions & {s for _, s in forks}
            for recorded in llm.requests[before:]:
                users = _users(recorded.json)
                assert users[:-1] == [f"q{k}" for k in range(20)] and users[-1] in ("left", "right")
        finally:  # an unclosed client's transport outlives this loop and breaks a later one
            for client in clients:
                await client.close()
    async with await SqlSessionStore.open(shared_db_url) as store:
        assert len(await store.sessions.list_sessions(platform="http")) == 2
