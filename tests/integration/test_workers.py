"""Two real `hermes gateway run` workers on one store: one conversation, whichever serves it.

The reproduction of the several-workers bug, turned into its contract, on a fresh PostgreSQL
database (HERMES_TEST_PG_URL; skipped without it) and on a shared SQLite file: alternating turns
see every earlier user message; concurrent senders never interleave a turn; compaction under
both workers loses and duplicates nothing; a worker killed with SIGKILL mid-turn frees the
session (PostgreSQL drops its advisory lock with the connection, its SQLite lease expires) and
its Telegram polling moves to the survivor. Bot API contract: only one getUpdates consumer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from agent.compaction.markers import SUMMARY_START
from sim.llm_server import FakeLLM, Turn
from state import SqlSessionStore
from state.values import ChatMessage, content_text
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import free_port
from tests.integration.workers import (
    Worker,
    ask,
    hermes_command,
    running_workers,
    worker_config,
    worker_env,
)
from tests.state.fixtures import shared_db_url

__all__ = ["shared_db_url"]

LEASE_TTL_S = 1.5
SUMMARY = "## Goal\nKeep chatting.\n## Next Steps\nAnswer the newest message."
SLOW = "slow-victim"
CLI_FOCUS = "the-cli-focus"
CLI_SUMMARY = "## Goal\nSummarised by hermes sessions compress."
CHAT_SYSTEM = "You are Hermes"


def _responder(body: dict[str, Any], api: str) -> Turn | None:
    """Summaries and micro folds get a short summary; the victim's turn hangs; chats echo."""
    first = _texts(body)[0] if _texts(body) else ""
    if not first.startswith(CHAT_SYSTEM):
        return Turn(text=CLI_SUMMARY if CLI_FOCUS in json.dumps(body) else SUMMARY)
    if _texts(body)[-1] == SLOW:
        return Turn(text="never delivered", delay_s=120)
    return None


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(responder=_responder) as fake:
        yield fake


def _configs(llm: FakeLLM, db_url: str, **sections: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        worker_config(
            llm_url=llm.openai_base_url,
            db_url=db_url,
            port=free_port(),
            lease_ttl_s=LEASE_TTL_S,
            **{k: (v(i) if callable(v) else v) for k, v in sections.items()},
        )
        for i in range(2)
    ]


async def test_two_workers_serve_one_conversation_losing_nothing(
    shared_db_url: str, llm: FakeLLM, tmp_path: Path
) -> None:
    """50 alternating turns: every request holds every earlier user message; 20 concurrent
    senders: no user-user adjacency, each sender's order kept; 120 alternating turns with a 16K
    window (three or more compactions, batch and micro racing across workers): no row lost or
    duplicated."""
    async with running_workers(tmp_path, _configs(llm, shared_db_url)) as workers:
        clients = [w.client() for w in workers]
        await _alternating_turns(llm, clients, 50)
        session = await _concurrent_senders(clients, senders=20, each=3)
        compacted = await _alternating_turns(llm, clients, 120, size=700, strict=False)
    async with await SqlSessionStore.open(shared_db_url) as store:
        await _assert_no_adjacent_users(store, session, senders=20, each=3)
        rows = await _assert_nothing_lost_or_duplicated(store, compacted, turns=120, size=700)
        info = await store.sessions.get_session(compacted)
    assert info is not None and info.compactions >= 2, "the window never forced a compaction"
    assert any(m["_kind"] == "summary" and m["_active"] for m in rows)


async def _alternating_turns(
    llm: FakeLLM, clients: list[Any], turns: int, *, size: int = 0, strict: bool = True
) -> str:
    """Turn i goes to worker i % 2, each after the previous reply; returns the session id.

    Strict: the request of turn i carries exactly the user messages 0..i. Otherwise (with
    compaction) it carries the newest two verbatim, older ones in order or summarised."""
    sent: list[str] = []
    session_id: str | None = None
    first_request = len(llm.requests)
    for i in range(turns):
        text = f"turn-{i:03d} " + "lorem ipsum dolor " * (size // 18)
        reply, session_id = await ask(clients[i % 2], text.strip(), session_id)
        sent.append(text.strip())
        assert reply == f"echo: {sent[-1]}", f"turn {i}: {reply[:80]!r}"
    assert session_id is not None
    chats = [r.json for r in llm.requests[first_request:] if _is_chat(r.json)]
    assert len(chats) == turns
    for i, body in enumerate(chats):
        users = _user_texts(body)
        if strict:
            assert users == sent[: i + 1], f"request {i} lacks earlier turns: {len(users)}"
            continue
        assert users[-2:] == sent[max(0, i - 1) : i + 1], f"request {i} lost the newest turns"
        assert users == [t for t in sent[: i + 1] if t in users], f"request {i} reordered"
        if len(users) < i + 1:
            assert any(SUMMARY_START in t for t in _texts(body)), f"request {i}: no summary"
    return session_id


async def _concurrent_senders(clients: list[Any], *, senders: int, each: int) -> str:
    """`senders` clients on one session, each sending `each` messages one after the other,
    alternating workers; returns the session id."""
    _, session_id = await ask(clients[0], "start")

    async def sender(j: int) -> None:
        for m in range(each):
            reply, _ = await ask(clients[(j + m) % 2], f"sender-{j:02d}-{m}", session_id)
            assert reply == f"echo: sender-{j:02d}-{m}"

    async with asyncio.timeout(120):
        await asyncio.gather(*(sender(j) for j in range(senders)))
    return session_id


async def _assert_no_adjacent_users(
    store: SqlSessionStore, session_id: str, *, senders: int, each: int
) -> None:
    rows = _chronological(await store.transcript.show(session_id, include_archived=True))
    roles = [m["role"] for m in rows if m["role"] in ("user", "assistant")]
    pairs = [i for i in range(len(roles) - 1) if roles[i] == roles[i + 1] == "user"]
    assert pairs == [], f"user-user adjacency at {pairs}"
    texts = [content_text(m) for m in rows if m["role"] == "user"]
    for j in range(senders):
        mine = [t for t in texts if t.startswith(f"sender-{j:02d}-")]
        assert mine == [f"sender-{j:02d}-{m}" for m in range(each)]


async def _assert_nothing_lost_or_duplicated(
    store: SqlSessionStore, session_id: str, *, turns: int, size: int
) -> list[ChatMessage]:
    rows = await store.transcript.show(session_id, include_archived=True)
    normal = [m for m in rows if m["_kind"] == "normal" and m["role"] in ("user", "assistant")]
    counts = Counter((m["role"], content_text(m)) for m in normal)
    duplicated = {key[1][:12]: n for key, n in counts.items() if n > 1}
    assert duplicated == {}, f"duplicated rows: {duplicated}"
    sent = [(f"turn-{i:03d} " + "lorem ipsum dolor " * (size // 18)).strip() for i in range(turns)]
    lost = [
        t[:8] for t in sent if counts[("user", t)] != 1 or counts[("assistant", f"echo: {t}")] != 1
    ]
    assert lost == [], f"lost rows: {lost}"
    active_users = [content_text(m) for m in rows if m["_active"] and m["role"] == "user"]
    assert len(active_users) == len(set(active_users)), "an archived row came back as active"
    return rows


async def test_a_killed_worker_frees_the_session_and_its_poller_role(
    shared_db_url: str, llm: FakeLLM, tmp_path: Path
) -> None:
    """Exactly one worker polls Telegram; SIGKILL it mid-turn: the other answers the session's
    next message within the lock bound, takes over polling, and nothing is lost or doubled."""
    async with FakeTelegram() as telegram:

        def telegram_section(i: int) -> dict[str, Any]:
            return {
                "telegram": {
                    "enabled": True,
                    "token": telegram.token,
                    "base_url": f"http://127.0.0.1:{telegram.port}/w{i}/bot",
                    "allowed_users": ["7"],
                }
            }

        configs = _configs(llm, shared_db_url, gateway=telegram_section)
        async with running_workers(tmp_path, configs) as workers:
            leader = await _the_one_poller(telegram)
            survivor = workers[1 - leader]
            polls_before = len(telegram.poll_consumers)
            session = await _crash_mid_turn(llm, workers[leader], survivor)
            tag = f"w{survivor.index}"
            await telegram.wait_for(lambda: tag in telegram.poll_consumers[polls_before:], 30)
            await telegram.push_text(42, 7, "still there?")
            await telegram.wait_for(lambda: "echo: still there?" in _shown(telegram), 30)
    async with await SqlSessionStore.open(shared_db_url) as store:
        rows = await store.transcript.show(session, include_archived=True)
    texts = [(m["role"], content_text(m)) for m in _chronological(rows) if m["role"] != "system"]
    assert texts == [
        ("user", "before"),
        ("assistant", "echo: before"),
        ("user", SLOW),
        ("user", "after the crash"),
        ("assistant", "echo: after the crash"),
    ]


async def _the_one_poller(telegram: FakeTelegram) -> int:
    """Polling starts, a message is answered and confirmed by the next poll: all of it by one
    consumer and without a 409 (a second poller would have terminated the first's polls)."""
    await telegram.wait_for(lambda: len(telegram.poll_consumers) >= 1, 30)
    await telegram.push_text(42, 7, "hello")
    await telegram.wait_for(lambda: "echo: hello" in _shown(telegram), 30)
    await telegram.wait_for(lambda: telegram.pending_update_ids == [], 30)  # the next poll
    consumers = set(telegram.poll_consumers)
    assert len(consumers) == 1, f"several workers poll: {consumers}"
    assert telegram.conflicts == 0
    return int(consumers.pop().removeprefix("w"))


def _shown(telegram: FakeTelegram) -> list[str]:
    """What the chat shows: each sent message as last edited (replies stream by edits)."""
    edited = {message_id: text for _, message_id, text in telegram.edits}
    return [edited.get(m.message_id, m.text) for m in telegram.sent]


async def _crash_mid_turn(llm: FakeLLM, victim: Worker, survivor: Worker) -> str:
    victim_client, survivor_client = victim.client(), survivor.client()
    _, session = await ask(survivor_client, "before")
    in_flight = asyncio.create_task(ask(victim_client, SLOW, session))
    async with asyncio.timeout(30):
        while not any(_is_chat(r.json) and _user_texts(r.json)[-1] == SLOW for r in llm.requests):
            await llm.wait_requests(len(llm.requests) + 1, timeout=30)
    await victim.kill()
    started = time.monotonic()
    reply, same = await ask(survivor_client, "after the crash", session)
    waited = time.monotonic() - started
    assert (reply, same) == ("echo: after the crash", session)
    assert waited < 20.0, f"the survivor waited {waited:.1f} s (lock bound 20 s)"
    with pytest.raises(openai.APIConnectionError):  # the victim's caller lost its connection
        await in_flight
    return session


def _is_chat(body: dict[str, Any] | None) -> bool:
    texts = _texts(body)
    return bool(texts) and texts[0].startswith(CHAT_SYSTEM)


def _texts(body: dict[str, Any] | None) -> list[str]:
    if not body:
        return []
    return [_text(m.get("content")) for m in body.get("messages") or ()]


def _user_texts(body: dict[str, Any] | None) -> list[str]:
    """The user messages of a request, summary markers (which may have the user role) aside."""
    if not body:
        return []
    users = [_text(m.get("content")) for m in body.get("messages") or () if m.get("role") == "user"]
    return [t for t in users if SUMMARY_START not in t]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return json.dumps(content)


def _chronological(rows: list[ChatMessage]) -> list[ChatMessage]:
    """Every row in the order it was first written (row ids grow with each append)."""
    return sorted((m for m in rows if m["_kind"] == "normal"), key=lambda m: m["_id"])


async def test_sessions_compress_while_a_gateway_serves_the_session(
    shared_db_url: str, llm: FakeLLM, tmp_path: Path
) -> None:
    """`hermes sessions compress` while a gateway keeps serving the session: it takes its turn
    between the gateway's, the gateway's next turn starts from the compacted set, and no row
    is lost or duplicated."""
    config = _configs(llm, shared_db_url)[0]
    sent: list[str] = []
    async with running_workers(tmp_path, [config]) as (worker,):
        client = worker.client()
        _, session = await ask(client, "turn-000")
        sent.append("turn-000")

        async def say(padding: str = "") -> None:
            text = f"turn-{len(sent):03d}{padding}"
            assert await ask(client, text, session) == (f"echo: {text}", session)
            sent.append(text)

        for _ in range(29):  # enough to compact, short of the gateway's own threshold
            await say(" lorem ipsum dolor" * 20)
        compress = await asyncio.create_subprocess_exec(
            *hermes_command(),
            "sessions",
            "compress",
            session,
            "--focus",
            CLI_FOCUS,
            env=worker_env(worker.home),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        done = asyncio.create_task(compress.communicate())
        while not done.done() and len(sent) < 1000:  # turns keep coming while the CLI runs
            await say()
            await asyncio.sleep(0.05)  # a person's pace, not a busy loop starving the CLI
        for _ in range(3):  # and after it: these must start from the compacted set
            await say()
        async with asyncio.timeout(60):
            out, err = await done
    assert compress.returncode == 0, (out + err).decode()
    assert out.decode().startswith(f"Compacted {session}")
    last = [r.json for r in llm.requests if _is_chat(r.json)][-1]
    assert any(CLI_SUMMARY in t for t in _texts(last)), "the gateway did not adopt it"
    assert _user_texts(last)[-1] == sent[-1]
    async with await SqlSessionStore.open(shared_db_url) as store:
        rows = await store.transcript.show(session, include_archived=True)
    normal = [m for m in rows if m["_kind"] == "normal" and m["role"] in ("user", "assistant")]
    counts = Counter((m["role"], content_text(m)) for m in normal)
    assert [t for t in sent if counts[("user", t)] != 1] == []
    assert [t for t in sent if counts[("assistant", f"echo: {t}")] != 1] == []
    assert sum(counts.values()) == 2 * len(sent)
