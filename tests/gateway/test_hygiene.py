"""Session hygiene with a real agent and store: when it fires, how it fails, what the user sees.

Hygiene is on the user's path, so in the default mode it compacts the way a turn makes room
(`AIAgent.make_room`, issue 31: "use the deterministic local summary as a stopgap rather than
make the user wait"): no summary call before the reply. Only the in-turn batch baseline
(`compression.speculative: false`, the anchor's behaviour) summarizes there, and only there can
a failed summary fail hygiene and start its backoff.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from agent.config import HermesConfig
from agent.messages import assistant_message, system_message, user_message
from gateway.hygiene import BACKOFF_S, HygieneOutcome, run_hygiene
from gateway.run import COMPACTED_NOTICE, GatewayRunner
from sim.llm_server import FakeLLM
from tests.gateway.harness import (
    RecordingSink,
    inbound,
    is_summary_request,
    make_config,
    start_runtime,
    summary_responder,
)
from tests.waits import WAIT_S

WINDOW = 4000
LIMIT = int(WINDOW * 0.85)
CHAT_KEY = "terminal:dm:u1"
"""The runner's lane key for `inbound(...)`'s default chat."""


BATCH = {"speculative": False}
"""The in-turn batch baseline: hygiene's compaction waits for the model's summary."""


def _config(llm: FakeLLM, db_path: Path, **compression: Any) -> HermesConfig:
    return make_config(
        llm,
        db_path,
        model={"context_length": WINDOW},
        compression={"protect_first_n": 1, "protect_last_n": 2, **compression},
    )


async def _seed(runtime: Any, *, messages: int, chars: int) -> str:
    """The chat's session, holding a system prompt and `messages` alternating turns."""
    info = await runtime.store.sessions.get_or_create_for_chat("terminal", CHAT_KEY, user_id="u1")
    rows = [system_message("You are a test assistant.")]
    for n in range(messages):
        text = f"turn {n}: " + "x" * chars
        rows.append(user_message(text) if n % 2 == 0 else assistant_message(text))
    await runtime.store.transcript.append(info.id, rows)
    return str(info.id)


async def _hygiene(runtime: Any, session_id: str, **kw: Any) -> HygieneOutcome:
    agent = await runtime.open_agent(session_id)
    async with asyncio.timeout(WAIT_S):
        return await run_hygiene(agent, runtime.store.meta, **kw)


def _summary_calls(llm: FakeLLM) -> int:
    return sum(1 for r in llm.requests if r.json and is_summary_request(r.json))


@pytest.mark.parametrize(
    ("api_tokens", "chars", "fires", "source"),
    [
        pytest.param(LIMIT, 400, True, "api", id="api-tokens-at-85pct-fire-on-a-small-estimate"),
        pytest.param(LIMIT - 1, 400, False, "api", id="api-tokens-below-85pct"),
        pytest.param(1000, 2800, False, "api", id="api-tokens-win-over-a-large-estimate"),
        pytest.param(None, 2800, True, "estimate", id="estimate-when-no-api-tokens"),
        pytest.param(None, 400, False, "estimate", id="small-estimate"),
    ],
)
async def test_hygiene_fires_at_85_percent_by_api_tokens_then_estimate(
    llm: FakeLLM,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    api_tokens: int | None,
    chars: int,
    fires: bool,
    source: str,
) -> None:
    """Real API tokens decide when known, else the rough estimate; at 85% the session compacts,
    with the stopgap (no summary call: the user does not wait for one)."""
    llm.responder = summary_responder()
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        session_id = await _seed(runtime, messages=10, chars=chars)
        with structlog.testing.capture_logs() as events:
            outcome = await _hygiene(runtime, session_id, api_tokens=api_tokens)
        info = await runtime.store.sessions.get_session(session_id)
    assert (outcome.decision.run, outcome.decision.source) == (fires, source)
    assert outcome.compacted is fires
    assert info.compactions == int(fires)
    assert _summary_calls(llm) == 0
    finished = [e for e in events if e["event"] == "compaction_finished"]
    assert [(e["reason"], e["outcome"]) for e in finished] == [("hygiene", "stopgap")] * fires


async def test_the_batch_baseline_summarizes_in_hygiene(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `speculative: false` (the anchor's batch compaction) hygiene waits for the model."""
    llm.responder = summary_responder()
    async with start_runtime(_config(llm, db_path, **BATCH), tmp_path, monkeypatch) as runtime:
        session_id = await _seed(runtime, messages=10, chars=2800)
        outcome = await _hygiene(runtime, session_id, api_tokens=None)
        info = await runtime.store.sessions.get_session(session_id)
    assert outcome.compacted and info.compactions == 1
    assert _summary_calls(llm) == 1


@pytest.mark.parametrize(
    ("messages", "enabled", "reason"),
    [
        pytest.param(3, True, "fewer than 4", id="three-messages"),
        pytest.param(6, False, "disabled", id="compression-disabled"),
    ],
)
async def test_hygiene_never_fires_on_short_or_disabled_sessions(
    llm: FakeLLM,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    messages: int,
    enabled: bool,
    reason: str,
) -> None:
    """Below 4 history messages or with compression off, even a full window is left alone."""
    llm.responder = summary_responder()
    config = _config(llm, db_path, enabled=enabled)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        session_id = await _seed(runtime, messages=messages, chars=6000)
        outcome = await _hygiene(runtime, session_id, api_tokens=WINDOW)
    assert not outcome.decision.run
    assert reason in outcome.decision.reason
    assert llm.requests == []


async def test_failure_backs_off_and_the_backoff_survives_a_restart(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed summary records 5 minutes of backoff in the store; a new runtime honours it."""
    llm.responder = summary_responder(fail=True)
    config = _config(llm, db_path, **BATCH)
    now = time.time()
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        session_id = await _seed(runtime, messages=6, chars=2800)
        failed = await _hygiene(runtime, session_id, api_tokens=None, clock=lambda: now)
        meta = await runtime.store.meta.get_meta(session_id)
    assert failed.error and not failed.compacted
    assert meta["hygiene_failures"] == 1
    assert meta["hygiene_backoff_until"] == pytest.approx(now + BACKOFF_S[0])
    calls_after_failure = _summary_calls(llm)

    llm.responder = summary_responder()
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        waiting = await _hygiene(runtime, session_id, api_tokens=None, clock=lambda: now + 60)
        assert _summary_calls(llm) == calls_after_failure
        later = now + BACKOFF_S[0] + 1
        retried = await _hygiene(runtime, session_id, api_tokens=None, clock=lambda: later)
        meta = await runtime.store.meta.get_meta(session_id)
    assert not waiting.decision.run and "backing off" in waiting.decision.reason
    assert retried.compacted
    assert "hygiene_failures" not in meta and "hygiene_backoff_until" not in meta


async def test_second_failure_backs_off_longer(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consecutive failures count up in the store and the backoff grows to 15 minutes."""
    llm.responder = summary_responder(fail=True)
    now = time.time()
    config = _config(llm, db_path, **BATCH)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        session_id = await _seed(runtime, messages=6, chars=2800)
        await _hygiene(runtime, session_id, api_tokens=None, clock=lambda: now)
        later = now + BACKOFF_S[0] + 1
        await _hygiene(runtime, session_id, api_tokens=None, clock=lambda: later)
        meta = await runtime.store.meta.get_meta(session_id)
    assert meta["hygiene_failures"] == 2
    assert meta["hygiene_backoff_until"] == pytest.approx(later + BACKOFF_S[1])


async def test_runner_compacts_first_and_tells_the_user(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An over-full session is compacted before the model call and the user gets a short notice;
    the model is asked nothing but the user's turn (the stopgap; at this tight window its
    summary is never upgraded, `agent.stopgap.upgrade_pays`)."""
    llm.responder = summary_responder()
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        session_id = await _seed(runtime, messages=6, chars=2800)
        runner = GatewayRunner(runtime)
        sink = RecordingSink()
        with structlog.testing.capture_logs() as events:
            async with asyncio.timeout(WAIT_S):
                outcome = await runner.submit(inbound("and now?"), sink)
                await (await runner.agent_for(session_id)).wait_background()
        await runner.stop()
    assert outcome.compacted and outcome.reply == "echo: and now?"
    assert sink.notices == [COMPACTED_NOTICE]
    kinds = ["summary" if is_summary_request(r.json or {}) else "chat" for r in llm.requests]
    assert kinds == ["chat"]
    assert [e["source"] for e in events if e["event"] == "hygiene_compacted"] == ["estimate"]


async def test_runner_uses_stored_api_tokens_after_a_restart(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart onto a smaller window, the last real prompt size triggers hygiene ("api")."""
    llm.responder = summary_responder()
    big = make_config(llm, db_path, compression={"protect_first_n": 1, "protect_last_n": 2})
    async with start_runtime(big, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        for n in range(3):
            await runner.submit(inbound(f"turn {n} " + "y" * 4000), RecordingSink())
        await runner.stop()
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        with structlog.testing.capture_logs() as events:
            async with asyncio.timeout(WAIT_S):
                outcome = await runner.submit(inbound("still there?"), RecordingSink())
        await runner.stop()
    assert outcome.compacted
    assert [e["source"] for e in events if e["event"] == "hygiene_compacted"] == ["api"]


async def test_user_turn_still_runs_after_a_hygiene_failure(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When hygiene fails, the user's message is still answered, without a compaction notice."""
    llm.responder = summary_responder(fail=True)
    config = _config(llm, db_path, **BATCH)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        session_id = await _seed(runtime, messages=6, chars=2800)
        runner = GatewayRunner(runtime)
        sink = RecordingSink()
        async with asyncio.timeout(WAIT_S):
            outcome = await runner.submit(inbound("hello?"), sink)
        await runner.stop()
        meta = await runtime.store.meta.get_meta(session_id)
    assert outcome.reply == "echo: hello?" and not outcome.compacted
    assert sink.notices == []
    assert meta["hygiene_failures"] == 1
