"""GatewayRunner over a real Runtime (FakeLLM + SQLite): ordering, isolation, commands, restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent.messages import assistant_message, system_message, user_message
from agent.micro_compaction import MicroCompaction
from gateway.platforms.base import ChatRef
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import (
    RecordingSink,
    inbound,
    make_config,
    request_texts,
    start_runtime,
    summary_responder,
)
from tests.waits import WAIT_S


class _FakeAdapter:
    """A PlatformAdapter that records what it sends."""

    name = "telegram"
    max_message_chars = 4096
    min_edit_interval_s = 0.0

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def start(self, deliver: Any) -> None: ...
    async def stop(self) -> None: ...

    def render(self, text: str) -> list[str]:
        return [text]

    async def send(self, chat: ChatRef, text: str) -> str:
        self.sent.append((chat.chat_id, text))
        return str(len(self.sent))

    async def edit(self, chat: ChatRef, message_id: str, text: str) -> None: ...
    async def typing(self, chat: ChatRef) -> None: ...


async def _ask(runner: GatewayRunner, text: str, **kw: Any) -> tuple[str, RecordingSink]:
    sink = RecordingSink()
    async with asyncio.timeout(WAIT_S):
        outcome = await runner.submit(inbound(text, **kw), sink)
    return outcome.reply, sink


async def test_reply_streams_and_persists(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message gets the model's reply, streamed in deltas, and both sides land in the store."""
    llm.script(Turn(text="Hello there, friend."))
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        reply, sink = await _ask(runner, "hi")
        await runner.stop()
        rows = await runtime.store.transcript.load_active(sink.session_id)
    assert reply == sink.final == "Hello there, friend."
    assert "".join(sink.deltas) == reply
    assert [(m["role"], m["content"]) for m in rows[1:]] == [
        ("user", "hi"),
        ("assistant", "Hello there, friend."),
    ]


async def test_message_sent_mid_turn_is_queued_and_answered_after_in_order(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second message during a running turn waits; its model request already holds turn one."""
    llm.script(Turn(text="first answer", delay_s=0.3), Turn(text="second answer"))
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        order: list[str] = []
        first = runner.submit(inbound("one"), RecordingSink())
        first.add_done_callback(lambda _: order.append("one"))
        await llm.wait_requests(1)
        second = runner.submit(inbound("two"), RecordingSink())
        second.add_done_callback(lambda _: order.append("two"))
        async with asyncio.timeout(WAIT_S):
            replies = [(await first).reply, (await second).reply]
        await runner.stop()
    assert replies == ["first answer", "second answer"]
    assert order == ["one", "two"]
    assert len(llm.requests) == 2
    assert request_texts(llm.requests[1].json)[-3:] == ["one", "first answer", "two"]


async def test_two_chats_run_in_parallel_without_leaking_context(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two chats' turns overlap, and each model request carries only its own chat's words."""
    llm.responder = lambda body, api: Turn(text="ok", delay_s=0.3)
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        alice = runner.submit(inbound("alice secret", user_id="alice"), RecordingSink())
        bob = runner.submit(inbound("bob secret", user_id="bob"), RecordingSink())
        await llm.wait_requests(2)
        assert not alice.done() and not bob.done()  # both turns are in flight at once
        async with asyncio.timeout(WAIT_S):
            outcomes = await asyncio.gather(alice, bob)
        await runner.stop()
    assert outcomes[0].session_id != outcomes[1].session_id
    for request in llm.requests:
        texts = request_texts(request.json)
        assert ("alice secret" in texts) != ("bob secret" in texts)


async def test_unknown_user_is_refused_and_never_reaches_the_model(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a chat platform a user missing from the allowlist gets a refusal, not a turn."""
    config = make_config(llm, db_path, gateway={"telegram": {"allowed_users": ["7"]}})
    adapter = _FakeAdapter()
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime, [adapter])  # type: ignore[list-item]
        await runner.deliver(inbound("let me in", platform="telegram", chat_id="9", user_id="9"))
        await runner.stop()
    assert llm.requests == []
    assert len(adapter.sent) == 1
    assert adapter.sent[0][0] == "9" and "allowlist" in adapter.sent[0][1]


async def test_new_starts_a_fresh_session_without_the_old_context(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/new routes the chat to a new session; the next model request lacks the old messages."""
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        _, before = await _ask(runner, "remember the cat")
        reply, _ = await _ask(runner, "/new")
        _, after = await _ask(runner, "what did I say?")
        await runner.stop()
        old = await runtime.store.sessions.get_session(before.session_id)
    assert reply.startswith("Started a new session")
    assert after.session_id != before.session_id
    assert old.end_reason == "new"
    assert "remember the cat" not in request_texts(llm.requests[-1].json)


async def test_compress_compacts_the_session(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/compress summarizes older turns through the context engine and counts a compaction."""
    llm.responder = summary_responder()
    config = make_config(
        llm,
        db_path,
        model={"context_length": 4000},
        compression={"protect_first_n": 1, "protect_last_n": 2},
    )
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        for n in range(4):
            _, sink = await _ask(runner, f"message number {n} " + "words " * 100)
        reply, _ = await _ask(runner, "/compress")
        await runner.stop()
        info = await runtime.store.sessions.get_session(sink.session_id)
    assert reply.startswith("Compacted:"), reply
    assert info.compactions == 1


async def test_status_reports_model_tokens_and_cache(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/status names the session, the model, the prompt tokens and the cache hit ratio."""
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        _, sink = await _ask(runner, "hello")
        reply, _ = await _ask(runner, "/status")
        await runner.stop()
    prompt_tokens = llm.requests[0]
    assert prompt_tokens is not None
    assert f"Session {sink.session_id} · model test-model" in reply
    assert "tokens of 100,000" in reply
    assert "Cache hit ratio" in reply
    assert len(llm.requests) == 1  # commands never call the model


async def test_restart_resumes_the_same_session_with_its_history(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new runtime and runner on the same database continue the chat's session and history."""
    config = make_config(llm, db_path)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        _, first = await _ask(runner, "my name is Ada")
        await runner.stop()
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        _, second = await _ask(runner, "what is my name?")
        await runner.stop()
    assert second.session_id == first.session_id
    texts = request_texts(llm.requests[-1].json)
    assert texts[-3:] == ["my name is Ada", "echo: my name is Ada", "what is my name?"]


async def test_failed_turn_answers_with_a_notice_and_the_lane_goes_on(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider failure becomes a short warning reply; the next message is answered normally."""
    llm.script(Turn(error=(400, "invalid_request_error", "bad")), Turn(text="fine now"))
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        failed, _ = await _ask(runner, "one")
        ok, _ = await _ask(runner, "two")
        await runner.stop()
    assert failed.startswith("⚠️")
    assert ok == "fine now"


async def test_stop_lets_a_turn_in_flight_finish(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop() refuses new work but waits (bounded) for the running turn, which completes."""
    llm.script(Turn(text="done late", delay_s=0.3))
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        pending = runner.submit(inbound("slow"), RecordingSink())
        await llm.wait_requests(1)
        await runner.stop(timeout_s=WAIT_S)
        assert pending.done()
        rows = await runtime.store.transcript.load_active((await pending).session_id)
    assert (await pending).reply == "done late"
    assert rows[-1]["content"] == "done late"


async def test_stop_drains_within_one_timeout_however_many_agents_have_background_work(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gateway.shutdown_timeout_s` bounds the whole drain (docs/deploy.md allows 15 s more
    before a hard kill): three sessions whose background summaries outlast it are settled side
    by side and left at the deadline, not waited for one after another (3x the timeout)."""
    limit = 1.0
    llm.responder = lambda body, api: (
        None if body.get("tools") else Turn(text="## Goal\nx", delay_s=20 * WAIT_S)
    )
    config = make_config(
        llm,
        db_path,
        model={
            "provider": "custom",
            "base_url": llm.openai_base_url,
            "concurrency": 4,
            "context_length": 16_000,
        },
        compression={"protect_first_n": 1, "protect_last_n": 2},
    )
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        for n in range(3):  # each over the threshold: a prepared compaction starts at once
            info = await runtime.store.sessions.create_session(platform="terminal")
            rows = [system_message("You are a test assistant.")]
            rows += [
                (user_message if i % 2 == 0 else assistant_message)(f"{n}.{i} " + "x" * 3_000)
                for i in range(16)
            ]
            await runtime.store.transcript.append(info.id, rows)
            await (await runner.agent_for(info.id)).finalize_turn()
        await llm.wait_requests(3, timeout=WAIT_S)
        assert all(not r.json.get("tools") for r in llm.requests)  # three summaries in flight
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with asyncio.timeout(WAIT_S):
            await runner.stop(timeout_s=limit)
        elapsed = loop.time() - started
    assert limit <= elapsed < 2 * limit


async def test_evicted_agents_release_their_per_session_state(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_CACHED_AGENTS idle agents leave memory and the runtime drops what it held for
    them (the micro-compaction state), so a long-running gateway does not grow without bound."""
    import gateway.run

    monkeypatch.setattr(gateway.run, "MAX_CACHED_AGENTS", 2)
    config = make_config(
        llm,
        db_path,
        model={"context_length": 4000},
        compression={"micro_compact": True, "micro_compact_when": "always", "protect_last_n": 2},
    )
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        (micro,) = [w for w in runtime.deps.end_of_turn if isinstance(w, MicroCompaction)]
        runner = GatewayRunner(runtime)
        sessions = []
        for chat in ("a", "b", "c", "d"):
            for turn in range(4):  # enough for a middle outside the tail: a pass runs
                _, sink = await _ask(
                    runner, f"{chat} {turn} " + "words " * 150, chat_id=chat, user_id=chat
                )
                await (await runner.agent_for(sink.session_id)).wait_background()
            sessions.append(sink.session_id)
        await runner.stop()
        assert runner.cached_agents == 2
        assert [micro.state_of(s) is None for s in sessions] == [True, True, False, False]
