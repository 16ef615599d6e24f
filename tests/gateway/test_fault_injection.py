"""Faults injected into a real runtime (FakeLLM on the Anthropic wire, SQLite): after each, the
person is told one short sentence, nothing half-written stays, and the next normal message to
the same chat is answered from a well-formed transcript.

Contracts: Anthropic's Messages API answers 529 `overloaded_error` and 500 `api_error`
(docs.anthropic.com/en/api/errors) and wants user/assistant turns to alternate with every
`tool_use` answered by a `tool_result`; SQLite answers SQLITE_FULL once `max_page_count` (or
the disk) is reached (sqlite.org/rescode.html#full); PostgreSQL refuses NUL in text.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from agent.compaction import find_orphans
from agent.messages import ChatMessage
from gateway.run import GatewayRunner, TurnOutcome
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import (
    RecordingSink,
    inbound,
    make_config,
    start_runtime,
)
from tests.waits import WAIT_S

Fault = Callable[[Any, FakeLLM, Path], Coroutine[Any, Any, str]]
"""Sets the fault up and returns the text to send while it holds."""


async def _ask(runner: GatewayRunner, text: str) -> TurnOutcome:
    async with asyncio.timeout(WAIT_S * 4):
        return await runner.submit(inbound(text), RecordingSink())


def _assert_well_formed(rows: list[ChatMessage]) -> None:
    """Roles alternate (tool results count with the user side) and every call is paired."""
    roles = ["user" if m["role"] == "tool" else m["role"] for m in rows if m["role"] != "system"]
    for first, second in zip(roles, roles[1:], strict=False):
        assert not (first == second == "user"), roles
    assert find_orphans(rows) == ([], []), rows


async def _set_pages(runtime: Any, limit: int | None, db: Path) -> None:
    if limit is None:
        sql = "PRAGMA max_page_count = 1073741823"
    else:
        pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
        sql = f"PRAGMA max_page_count = {pages}"
    await runtime.store._write("pages", lambda conn: conn.exec_driver_sql(sql))


async def _too_long(runtime: Any, llm: FakeLLM, db: Path) -> str:
    return "x" * 300_000


async def _hostile(runtime: Any, llm: FakeLLM, db: Path) -> str:
    return "lone \ud800 surrogate, NUL \x00 and a pair \ud83d\ude00"


async def _overloaded(runtime: Any, llm: FakeLLM, db: Path) -> str:
    llm.script(Turn(error=(529, "overloaded_error", "Overloaded")))
    return "are you there?"


async def _provider_500_after_a_tool(runtime: Any, llm: FakeLLM, db: Path) -> str:
    from sim.llm_server import ToolCallSpec

    llm.script(
        Turn(tool_calls=[ToolCallSpec("no_such_tool", "{}")]),
        Turn(error=(500, "api_error", "Internal server error")),
    )
    return "use a tool please"


async def _disk_full(runtime: Any, llm: FakeLLM, db: Path) -> str:
    await _set_pages(runtime, 0, db)
    return "y" * 150_000


FAULTS: dict[str, tuple[Fault, str]] = {
    "too long": (_too_long, "gateway.max_message_chars allows 200,000"),
    "hostile text": (_hostile, "echo: lone \ufffd surrogate"),
    "provider overloaded": (_overloaded, "anthropic"),
    "provider 500 after a tool": (_provider_500_after_a_tool, "anthropic"),
    "disk full": (_disk_full, "disk is full"),
}


@pytest.mark.parametrize("name", list(FAULTS))
async def test_after_a_fault_the_next_message_is_answered_from_a_well_formed_session(
    name: str, llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault, says = FAULTS[name]
    config = make_config(llm, db_path, model={"max_retries": 0})
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        try:
            first = await _ask(runner, "hello")
            assert first.reply == "echo: hello"
            stored_before = await runtime.store.transcript.load_active(first.session_id)
            text = await fault(runtime, llm, db_path)
            during = await _ask(runner, text)
            assert says in during.reply, during.reply
            assert "Traceback" not in during.reply and "/" not in during.reply.split("(")[0]
            await _set_pages(runtime, None, db_path)
            after = await _ask(runner, "still there?")
            assert after.reply == "echo: still there?", after.reply
            assert after.session_id == first.session_id
            rows = await runtime.store.transcript.load_active(first.session_id)
            _assert_well_formed(rows)
            assert [m["_id"] for m in rows[: len(stored_before)]] == [
                m["_id"] for m in stored_before
            ]
            sent = llm.requests[-1].json["messages"]
            sent_roles = [m["role"] for m in sent]
            for a, b in zip(sent_roles, sent_roles[1:], strict=False):
                assert a != b, sent_roles  # the Messages API wants strict alternation
            if name in ("too long", "disk full"):
                assert all(text[:50] not in str(m.get("content")) for m in rows)
            sessions = await runtime.store.sessions.list_sessions()
            assert len(sessions) == 1, "no fault leaves an orphan session"
        finally:
            await runner.stop()


async def test_a_too_long_first_message_creates_no_session(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused at the door: no session, no row, no model call; over half the window is
    refused too (a 100K-token window takes at most 50K tokens of message)."""
    config = make_config(llm, db_path, gateway={"max_message_chars": 1_000_000})
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        try:
            refused = await _ask(runner, "z" * 250_000)
            assert "the model's 100,000-token window allows 200,000" in refused.reply
            assert refused.kind == "failed"
            assert await runtime.store.sessions.list_sessions() == []
            assert llm.requests == []
        finally:
            await runner.stop()
