"""Micro-compaction through the real agent loop: a SQLite store, fake main and auxiliary models."""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent.archive.anchors import split_index
from agent.compaction.markers import is_micro_marker, parse_summary_marker
from agent.compaction.micro_telemetry import TELEMETRY_PREFIX
from agent.messages import strip_meta
from agent.session_meta import read_meta
from agent.tokens import estimate_tokens_rough
from tests.agent.test_micro_compaction_harness import (
    Summarizer,
    build_rig,
    exchange_of,
    markers,
    turn,
    user_texts,
)


def telemetry(logs: list[dict]) -> list[dict]:
    """The JSON payloads of the telemetry lines among captured log events."""
    return [
        json.loads(e["event"][len(TELEMETRY_PREFIX) :])
        for e in logs
        if str(e.get("event", "")).startswith(TELEMETRY_PREFIX)
    ]


async def test_exactly_one_exchange_per_pass(tmp_path: Path) -> None:
    """Each pass sends one assistant message with its tool results and removes exactly those."""
    rig = await build_rig(tmp_path, tool_rounds=1)
    agent = await rig.new_session()
    with capture_logs() as logs:
        for i in range(10):
            before = len(rig.summarizer.folds)
            await turn(agent, f"request {i}")
            if len(rig.summarizer.folds) > before:
                sent = exchange_of(rig.summarizer.folds[-1])
                assert len(re.findall(r"^\[assistant #\d+\]$", sent, re.M)) == 1
                assert len(re.findall(r"^\[tool: read_log #\d+\]$", sent, re.M)) <= 1
    lines = telemetry(logs)
    assert len(lines) == len(rig.summarizer.folds) >= 4
    assert all(p["outcome"] == "absorbed" for p in lines)
    assert {p["exchange_messages"] for p in lines} <= {1, 2}
    assert 2 in {p["exchange_messages"] for p in lines}  # a call with its result, together
    for p in lines[1:]:  # after the first, the old marker goes and the new one comes
        assert p["messages_after"] - p["messages_before"] == -p["exchange_messages"]
    await rig.store.aclose()


async def test_users_verbatim_and_one_marker_after_100_passes(tmp_path: Path) -> None:
    """After 100 passes every user message is there verbatim, in order, and one marker remains."""
    rig = await build_rig(tmp_path)
    agent = await rig.new_session()
    sent: list[str] = []
    while len(rig.summarizer.folds) < 100 and len(sent) < 130:
        sent.append(f"please do task {len(sent)} with care")
        await turn(agent, sent[-1])
    state = rig.micro.state_of(agent.session_id)
    assert state is not None and state.passes_total == 100
    assert user_texts(agent.transcript) == sent
    assert markers(agent.transcript) == (1, 0)
    stored = await rig.store.transcript.load_active(agent.session_id)
    assert user_texts(stored) == sent and markers(stored) == (1, 0)
    assert [m["_id"] for m in stored] == [m["_id"] for m in agent.transcript]
    await rig.store.aclose()


async def test_resume_continues_at_the_cursor_without_resummarizing(tmp_path: Path) -> None:
    """A new agent and micro work on the same store fold the next exchange, not an old one."""
    rig = await build_rig(tmp_path)
    agent = await rig.new_session()
    for i in range(8):
        await turn(agent, f"request {i}")
    folded = [exchange_of(r) for r in rig.summarizer.folds]
    summary = parse_summary_marker(next(m for m in agent.transcript if is_micro_marker(m)))
    fresh = type(rig.micro)(
        rig.deps.config.compression,
        summarizer=rig.micro._summarizer,
        summary_model="aux-model",
    )
    resumed = await rig.open(agent.session_id, micro=fresh)
    assert [(m["_id"], strip_meta(m)) for m in resumed.transcript] == [
        (m["_id"], strip_meta(m)) for m in agent.transcript
    ]
    await turn(resumed, "request 8")
    request = rig.summarizer.folds[-1]
    assert exchange_of(request) not in folded
    last = int(re.search(r"answer to request (\d+)", folded[-1]).group(1))  # type: ignore[union-attr]
    next_answer = f"answer to request {last + 1}:"
    assert next_answer in exchange_of(request)
    body, _ = split_index(summary or "")
    assert f"<rolling-summary>\n{body}\n</rolling-summary>" in request.messages[-1]["content"]
    assert markers(resumed.transcript) == (1, 0)
    state = fresh.state_of(agent.session_id)
    assert state is not None and state.passes_total == len(folded) + 1  # totals survived
    await rig.store.aclose()


async def test_poison_exchange_is_skipped_after_three_failures(tmp_path: Path) -> None:
    """Three failures on one exchange leave the transcript alone, then the cursor moves past it."""
    aux = Summarizer(fail_when=lambda prompt: "answer to poison" in prompt)
    rig = await build_rig(tmp_path, summarizer=aux)
    agent = await rig.new_session()
    for text in ("first", "poison", "third", "fourth", "fifth"):
        await turn(agent, text)
    with capture_logs() as logs:
        while not any("answer to poison" in exchange_of(r) for r in aux.folds):
            await turn(agent, f"filler {len(aux.folds)}")
        for i in range(3):
            snapshot = copy.deepcopy(agent.transcript)
            await turn(agent, f"after {i}")
            if i < 2:  # the failed pass changed nothing but the new turn's own messages
                assert agent.transcript[: len(snapshot)] == snapshot
        await turn(agent, "after skip")
    lines = telemetry(logs)
    outcomes = [p["outcome"] for p in lines]
    assert outcomes[:3] == ["failed", "failed", "failed"]
    assert [p["skipped"] for p in lines[:3]] == [False, False, True]
    assert outcomes[3] == "absorbed"
    assert "answer to poison" not in exchange_of(aux.folds[-1])
    assert any("skipping exchange at cursor" in str(e["event"]) for e in logs)
    poison = [m for m in agent.transcript if "answer to poison" in str(m.get("content"))]
    assert len(poison) == 1  # still in the transcript, for a later defrag or batch compaction
    meta = (await read_meta(rig.store.meta, agent.session_id)).micro
    assert meta.failures_total == 3 and meta.fail_count == 0
    await rig.store.aclose()


async def test_the_anchor_index_does_not_count_toward_defrag(tmp_path: Path) -> None:
    """A rolling summary just under micro_defrag_tokens stays un-defragged although its anchor
    index (our bookkeeping, not the model's prose) takes it over."""
    aux = Summarizer(text_for=lambda prompt, n: f"## Goal\nfold {n:03d} " + "f" * 770)
    rig = await build_rig(tmp_path, summarizer=aux, tool_rounds=1, micro_defrag_tokens=200)
    agent = await rig.new_session()
    for i in range(10):
        await turn(agent, f"request {i}")
    summary = parse_summary_marker(next(m for m in agent.transcript if is_micro_marker(m))) or ""
    body, index = split_index(summary)
    assert estimate_tokens_rough(body) <= 200 < estimate_tokens_rough(summary) and index
    assert len(aux.folds) >= 5 and aux.defrags == []
    await rig.store.aclose()


@pytest.mark.parametrize(("defrag_chars", "accepted"), [(200, True), (4_000, False)])
async def test_defrag_is_kept_only_when_it_shrinks(
    tmp_path: Path, defrag_chars: int, accepted: bool
) -> None:
    """A defrag that really shrinks replaces the summary; one that does not is dropped and backs off."""

    def text_for(prompt: str, n: int) -> str:
        if "grown baggy" in prompt:
            return "## Goal\ncompact " + "d" * defrag_chars
        return f"## Goal\nfold {n} " + "f" * 900  # each fold: a ~230-token summary

    aux = Summarizer(text_for=text_for)
    rig = await build_rig(tmp_path, summarizer=aux, tool_rounds=1, micro_defrag_tokens=200)
    agent = await rig.new_session()
    with capture_logs() as logs:
        for i in range(12):
            await turn(agent, f"request {i}")
            if aux.defrags:
                break
        defrag_pass = telemetry(logs)[-1]
        await turn(agent, "one more")
    assert len(aux.defrags) == 1 and defrag_pass["defrag"] is True
    summary = parse_summary_marker(next(m for m in agent.transcript if is_micro_marker(m))) or ""
    after = telemetry(logs)[-1]
    if accepted:
        assert defrag_pass["outcome"] == "defragged"
        assert defrag_pass["tokens_delta"] < 0
        assert any("Micro-compaction defrag" in str(e["event"]) for e in logs)
    else:
        assert defrag_pass["outcome"] == "defrag_rejected"
        assert defrag_pass["tokens_delta"] == 0 and "compact" not in summary
        assert after["defrag"] is False and after["outcome"] == "absorbed"  # backed off
    await rig.store.aclose()


@pytest.mark.parametrize(
    ("when", "cache_ttl", "idle_s", "expect_pass"),
    [
        ("always", "5m", 0, True),
        ("cold", "5m", 0, False),  # warm prefix: leave it alone
        ("cold", "5m", 301, True),  # idle past the TTL: the cache is cold anyway
        ("cold", "1h", 301, False),
    ],
)
async def test_cadence_cold_or_always(
    tmp_path: Path, when: str, cache_ttl: str | None, idle_s: float, expect_pass: bool
) -> None:
    """`cold` folds only when a rewrite costs no cache write; `always` folds after every turn.
    At a window that is not tight: a tight one weighs a cold fold in money (`test_a_tight_window_...`)."""
    rig = await build_rig(
        tmp_path,
        cache_ttl=cache_ttl,
        micro_compact_when=when,
        tool_rounds=1,
        context_length=64_000,
    )
    agent = await rig.new_session()
    for i in range(6):
        await agent.run_turn(f"request {i}")
    agent.last_request_at = time.monotonic() - idle_s
    await agent.finalize_turn()
    await agent.wait_background()
    assert (len(rig.summarizer.folds) == 1) is expect_pass
    await rig.store.aclose()


@pytest.mark.parametrize(("tool_rounds", "expect_pass"), [(0, False), (1, True)])
async def test_uncached_route_folds_only_when_the_fold_pays(
    tmp_path: Path, tool_rounds: int, expect_pass: bool
) -> None:
    """Without a prompt cache there is no warm prefix to spare, but a fold is a model call: a
    150-token answer saves less per request than the marker and the summary growth cost, so it
    waits; a tool-heavy exchange repays its call within its horizon (the requests until the next batch compaction)."""
    rig = await build_rig(
        tmp_path,
        cache_ttl=None,
        micro_compact_when="cold",
        tool_rounds=tool_rounds,
        context_length=64_000,
    )
    agent = await rig.new_session()
    for i in range(6):
        await agent.run_turn(f"request {i}")
    await agent.finalize_turn()
    await agent.wait_background()
    assert (len(rig.summarizer.folds) == 1) is expect_pass
    await rig.store.aclose()


@pytest.mark.parametrize(("cache_ttl", "idle_s"), [(None, 0), ("5m", 301)])
async def test_a_tight_window_folds_nothing_that_the_next_batch_compaction_undoes(
    tmp_path: Path, cache_ttl: str | None, idle_s: float
) -> None:
    """At 16K (`is_tight_window`) the tool-heavy exchange that pays at 64K above, uncached or
    with the cache gone cold, waits: the batch compaction it would defer lands at the same level
    anyway, so the fold's net horizon is no requests (`agent.compaction.fold_cost`)."""
    rig = await build_rig(
        tmp_path,
        cache_ttl=cache_ttl,
        micro_compact_when="cold",
        tool_rounds=1,
        context_length=16_000,
    )
    agent = await rig.new_session()
    for i in range(6):
        await agent.run_turn(f"request {i}")
    agent.last_request_at = time.monotonic() - idle_s
    with capture_logs() as logs:
        await agent.finalize_turn()
        await agent.wait_background()
    assert rig.summarizer.folds == []
    assert any(e.get("why") == "fold_would_not_pay" for e in logs)
    await rig.store.aclose()


async def test_cold_cadence_runs_on_a_warm_cache_once_occupancy_is_high(tmp_path: Path) -> None:
    """Past `micro_occupancy_trigger` of the threshold, a warm cache no longer holds a pass back."""
    rig = await build_rig(
        tmp_path, cache_ttl="5m", micro_compact_when="cold", micro_occupancy_trigger=0.3
    )
    agent = await rig.new_session()
    with capture_logs() as logs:
        for i in range(40):
            await turn(agent, f"request {i}")
    lines = telemetry(logs)
    assert lines and all(p["cadence"] == "occupancy" for p in lines)
    assert all(p["occupancy_pct"] is not None for p in lines)
    assert lines[0]["tokens_before"] >= 0.3 * lines[0]["threshold_tokens"]
    await rig.store.aclose()


async def test_switched_off(tmp_path: Path) -> None:
    """`compression.micro_compact: false` means no pass at all."""
    rig = await build_rig(tmp_path, micro_compact=False)
    agent = await rig.new_session()
    for i in range(10):
        await turn(agent, f"request {i}")
    assert rig.summarizer.folds == [] and markers(agent.transcript) == (0, 0)
    await rig.store.aclose()


async def test_store_failure_leaves_the_transcript_untouched(tmp_path: Path) -> None:
    """If archive_and_compact fails when a pass's proposal is adopted, nothing changes and the
    failure is counted."""
    rig = await build_rig(tmp_path)
    agent = await rig.new_session()
    for i in range(6):
        await agent.run_turn(f"request {i}")

    async def broken(*_args: object, **_kw: object) -> None:
        raise OSError("disk full")

    agent.deps.store.transcript.archive_and_compact = broken  # type: ignore[method-assign]
    snapshot = copy.deepcopy(agent.transcript)
    with capture_logs() as logs:
        await agent.finalize_turn()
        await agent.wait_background()
        assert not await agent.proposals.adopt_ready()
    assert agent.transcript == snapshot
    lines = telemetry(logs)
    assert [(p["outcome"], p["reason"]) for p in lines] == [("failed", "store_failed")]
    await rig.store.aclose()


async def test_credentials_are_redacted_and_the_prompt_says_so(tmp_path: Path) -> None:
    """The fold prompt asks for [REDACTED]; a key the summarizer echoes is redacted anyway."""
    aux = Summarizer(text_for=lambda _p, _n: "## Goal\nuse key sk-" + "a1B2c3D4" * 4)
    rig = await build_rig(tmp_path, summarizer=aux)
    agent = await rig.new_session()
    for i in range(6):
        await turn(agent, f"request {i}")
    assert "[REDACTED]" in aux.folds[0].messages[-1]["content"]
    summary = parse_summary_marker(next(m for m in agent.transcript if is_micro_marker(m)))
    assert summary is not None and "sk-a1B2" not in summary and "[REDACTED]" in summary
    await rig.store.aclose()


def _rolling(prompt: str) -> str:
    found = re.search(r"<rolling-summary>\n(.*?)\n</rolling-summary>", prompt, re.S)
    return found.group(1) if found else "## Goal"


async def test_a_defrag_that_returns_the_summary_unchanged_is_never_kept(tmp_path: Path) -> None:
    """Issue 14: a summarizer that answers every defrag with the rolling summary 1:1 must not
    have it accepted, nor turn every pass into a defrag: the backoff floor survives the folds
    (each of which writes a new marker row), so folding goes on and defrags stay rare."""

    def text_for(prompt: str, n: int) -> str:
        if "grown baggy" in prompt:
            return _rolling(prompt)  # the old summary, unchanged
        return _rolling(prompt) + f"\nfold {n}: " + "z" * 140  # grows ~40 tokens a fold

    aux = Summarizer(text_for=text_for)
    rig = await build_rig(tmp_path, summarizer=aux, tool_rounds=1, micro_defrag_tokens=200)
    agent = await rig.new_session()
    with capture_logs() as logs:
        for i in range(40):
            await turn(agent, f"request {i}")
    passes = telemetry(logs)
    defrags = [p for p in passes if p["defrag"]]
    assert defrags and all(p["outcome"] == "defrag_rejected" for p in defrags)
    assert all(p["reason"] == "not_smaller" for p in defrags)
    # A rejected defrag waits until the summary grew by half the defrag size (~3 folds here).
    assert len(defrags) <= len(passes) // 3
    assert sum(p["outcome"] == "absorbed" for p in passes) >= len(passes) - len(defrags)
    await rig.store.aclose()


async def test_a_defrag_that_drops_the_middle_is_rejected(tmp_path: Path) -> None:
    """A defrag that shrinks the summary but no longer names the middle it absorbed (its
    tickets, paths, identifiers) is rejected: that middle stays in the transcript."""

    def text_for(prompt: str, n: int) -> str:
        if "grown baggy" in prompt:
            return "## Goal\nall done"
        return _rolling(prompt) + f"\nfold {n}: " + "z" * 140

    aux = Summarizer(text_for=text_for)
    rig = await build_rig(tmp_path, summarizer=aux, tool_rounds=1, micro_defrag_tokens=200)
    agent = await rig.new_session()
    with capture_logs() as logs:
        for i in range(20):
            await turn(agent, f"fix HERM-{100 + i} in gateway/run_{i}.py")
            if aux.defrags:
                break
    defrag = telemetry(logs)[-1]
    assert defrag["defrag"] is True
    assert (defrag["outcome"], defrag["reason"]) == ("defrag_rejected", "middle_dropped")
    assert "all done" not in str(agent.transcript)
    await rig.store.aclose()
