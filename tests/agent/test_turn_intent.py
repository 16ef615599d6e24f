"""A turn is a transaction of intent: nothing half-joins the transcript, and no failure leaves
a session the next message cannot use.

Contracts these tests hold the agent to:
- SQLite answers SQLITE_FULL when a write needs a page it cannot get, the disk full or
  `PRAGMA max_page_count` reached (https://sqlite.org/rescode.html#full); the store maps it to
  StoreFull and writes nothing (tests/state/test_faults.py).
- Providers want alternating turns: Anthropic's Messages API merges or rejects consecutive
  same-role turns, llama.cpp's chat templates raise "Conversation roles must alternate
  user/assistant/user/assistant/..."; every tool call must be answered by a result before the
  next user turn (OpenAI: "An assistant message with 'tool_calls' must be followed by tool
  messages responding to each 'tool_call_id'").
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.agent import AIAgent
from agent.config import HermesConfig
from agent.context_compressor import ContextCompressor
from agent.errors import ProviderUnavailable, StoreFull
from agent.messages import ChatMessage, assistant_message, tool_message, user_message
from agent.providers.base import ProviderRequest
from agent.turn import UNANSWERED_MARK, failed_mark, well_formed
from state import SqlSessionStore
from tests.agent.scripted import agent_on_store, tool_call
from tests.fakes.provider import FakeProvider

NO_LIMIT = "PRAGMA max_page_count = 1073741823"


async def _rig(tmp_path: Path, provider: FakeProvider) -> tuple[AIAgent, SqlSessionStore]:
    config = HermesConfig()
    return await agent_on_store(
        tmp_path,
        provider,
        lambda: ContextCompressor(
            config.compression, summarizer=FakeProvider(), summary_model="aux"
        ),
        config=config,
    )


async def _limit_pages(store: SqlSessionStore, path: Path) -> None:
    pages = sqlite3.connect(path).execute("PRAGMA page_count").fetchone()[0]
    sql = f"PRAGMA max_page_count = {pages}"
    await store._write("limit", lambda conn: conn.exec_driver_sql(sql))


async def _unlimit(store: SqlSessionStore) -> None:
    await store._write("unlimit", lambda conn: conn.exec_driver_sql(NO_LIMIT))


def _roles(request: ProviderRequest) -> list[str]:
    return [str(m.get("role")) for m in request.messages]


def _assert_alternates(request: ProviderRequest) -> None:
    """No two user (or two assistant) turns in a row once tool results are folded in."""
    turns = [r for r in _roles(request) if r != "system"]
    folded = ["user" if r == "tool" else r for r in turns]
    for first, second in zip(folded, folded[1:], strict=False):
        assert not (first == second == "user"), _roles(request)


async def test_a_message_the_store_cannot_take_leaves_the_session_as_it_was(
    tmp_path: Path,
) -> None:
    """The disk fills as the user's message is written: the turn fails with StoreFull before
    any model call, memory and store are as before, and once space is back the next message
    is answered with no trace of the refused one."""
    provider = FakeProvider().script("first answer", "second answer")
    agent, store = await _rig(tmp_path, provider)
    try:
        await agent.run_turn("hello")
        before_memory = [m["_id"] for m in agent.transcript]
        before_store = [m["_id"] for m in await store.transcript.load_active(agent.session_id)]
        await _limit_pages(store, tmp_path / "state.db")
        with pytest.raises(StoreFull):
            await agent.run_turn("y" * 300_000)
        assert len(provider.requests) == 1, "no model call for a message that was not stored"
        assert [m.get("_id") for m in agent.transcript] == before_memory
        assert [
            m["_id"] for m in await store.transcript.load_active(agent.session_id)
        ] == before_store
        await _unlimit(store)
        await agent.sync_with_store()
        result = await agent.run_turn("after the disk was freed")
        assert result.reply == "second answer"
        sent = provider.requests[-1]
        assert all("y" * 100 not in str(m.get("content")) for m in sent.messages)
        assert [m.get("content") for m in sent.messages][-1] == "after the disk was freed"
        _assert_alternates(sent)
    finally:
        await store.aclose()


async def test_a_provider_failure_after_the_message_was_stored_marks_the_turn(
    tmp_path: Path,
) -> None:
    """The provider fails after the user's words were stored: they stay (nothing is lost),
    the turn ends with a marked assistant message, and the next request alternates roles."""
    down = ProviderUnavailable("fake", "m", "connection refused")
    provider = FakeProvider().script(down, "answered now")
    agent, store = await _rig(tmp_path, provider)
    try:
        with pytest.raises(ProviderUnavailable):
            await agent.run_turn("are you there?")
        stored = await store.transcript.load_active(agent.session_id)
        assert [m["role"] for m in stored][-2:] == ["user", "assistant"]
        assert stored[-2]["content"] == "are you there?"
        assert stored[-1]["content"] == failed_mark("ProviderUnavailable")
        await agent.run_turn("hello again")
        _assert_alternates(provider.requests[-1])
        contents = [m.get("content") for m in provider.requests[-1].messages]
        assert contents[-3:] == [
            "are you there?",
            failed_mark("ProviderUnavailable"),
            "hello again",
        ]
    finally:
        await store.aclose()


async def test_a_failure_between_tool_calls_pairs_every_call(tmp_path: Path) -> None:
    """The model asked for a tool, the tool ran, then the provider failed: the stored turn has
    the call, its result and the failure mark; the next request pairs every call."""
    provider = FakeProvider().script(
        tool_call("no_such_tool"), ProviderUnavailable("fake", "m", "reset"), "fine"
    )
    agent, store = await _rig(tmp_path, provider)
    try:
        with pytest.raises(ProviderUnavailable):
            await agent.run_turn("use a tool")
        stored = await store.transcript.load_active(agent.session_id)
        assert [m["role"] for m in stored][1:] == ["user", "assistant", "tool", "assistant"]
        await agent.run_turn("next")
        sent = provider.requests[-1]
        assert well_formed(sent.messages) == list(sent.messages)
        _assert_alternates(sent)
    finally:
        await store.aclose()


async def test_a_reply_the_store_lost_never_makes_two_user_turns(tmp_path: Path) -> None:
    """The disk fills as the model's reply is written: the user's message stays stored with
    no answer. The next turn starts from the store, and the request marks the gap instead of
    sending two user turns in a row."""
    path = tmp_path / "state.db"
    agent_store: list[SqlSessionStore] = []

    async def fill_then_answer(request: ProviderRequest) -> str:
        await _limit_pages(agent_store[0], path)
        return "z" * 300_000

    provider = FakeProvider().script(fill_then_answer, "recovered")
    agent, store = await _rig(tmp_path, provider)
    agent_store.append(store)
    try:
        with pytest.raises(StoreFull):
            await agent.run_turn("question one")
        await _unlimit(store)
        assert await agent.sync_with_store() is True, "an uncertain write is re-read"
        assert [m["role"] for m in agent.transcript][-1] == "user"
        await agent.run_turn("question two")
        contents = [m.get("content") for m in provider.requests[-1].messages]
        assert contents[-3:] == ["question one", UNANSWERED_MARK, "question two"]
        _assert_alternates(provider.requests[-1])
    finally:
        await store.aclose()


async def test_hostile_text_is_stored_as_it_is_sent(tmp_path: Path) -> None:
    """A lone surrogate and a NUL (what `$'\\xff'` on argv and a careless client produce)
    become U+FFFD once, in memory, in the store and in the request alike; the session
    keeps working."""
    provider = FakeProvider().script("one", "two")
    agent, store = await _rig(tmp_path, provider)
    try:
        await agent.run_turn("a\ud800b\x00c")
        assert provider.requests[-1].messages[-1]["content"] == "a\ufffdb\ufffdc"
        stored = await store.transcript.load_active(agent.session_id)
        assert stored[-2]["content"] == "a\ufffdb\ufffdc"
        assert (await agent.run_turn("plain")).reply == "two"
    finally:
        await store.aclose()


async def test_a_cancel_during_the_first_write_leaves_nothing_half_joined(
    tmp_path: Path,
) -> None:
    """Ctrl-C while the user's words are being written: the transcript in memory holds only
    what the store holds, and the next turn is answered normally."""
    provider = FakeProvider().script("only answer")
    agent, store = await _rig(tmp_path, provider)
    try:
        task = asyncio.ensure_future(agent.run_turn("cut short"))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert all(m.get("_persisted") for m in agent.transcript)
        await agent.sync_with_store()
        await agent.run_turn("again")
        _assert_alternates(provider.requests[-1])
        assert provider.requests[-1].messages[-1]["content"] == "again"
    finally:
        await store.aclose()


# -- the provider edge, purely -------------------------------------------------------------


def _message(kind: str, n: int) -> ChatMessage:
    match kind:
        case "user":
            return user_message(f"u{n}")
        case "assistant":
            return assistant_message(f"a{n}")
        case "call":
            call = {"id": f"c{n}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            return assistant_message(None, [call])  # type: ignore[list-item]
        case _:
            return tool_message(f"c{n}", "t", f"r{n}")


@given(st.lists(st.sampled_from(["user", "assistant", "call", "tool"]), max_size=30))
def test_well_formed_requests_alternate_and_pair_every_call(kinds: list[str]) -> None:
    """Whatever a store holds after failures, the request alternates user turns with
    assistant turns and answers every call; applying it twice changes nothing."""
    messages = [_message(kind, n) for n, kind in enumerate(kinds)]
    out = well_formed(messages)
    roles = [m.get("role") for m in out]
    for first, second in zip(roles, roles[1:], strict=False):
        assert not (first == second == "user")
    open_calls: set[str] = set()
    for message in out:
        if message.get("role") == "tool":
            assert message.get("tool_call_id") in open_calls
            open_calls.discard(str(message.get("tool_call_id")))
        else:
            assert not open_calls, "a call went unanswered before the next message"
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert well_formed(out) == out
    user_texts = [m.get("content") for m in messages if m.get("role") == "user"]
    assert [m.get("content") for m in out if m.get("role") == "user"] == user_texts
