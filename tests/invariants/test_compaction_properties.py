"""Property tests: every compress() over generated transcripts keeps DESIGN's invariants."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_event
from hypothesis import strategies as st
from structlog.testing import capture_logs

from agent.compaction.boundary import head_end
from agent.compaction.markers import is_marker
from agent.compaction.plan import DEGRADE_DETAILS
from agent.compaction.prune import PRUNED_TOOL_OUTPUT
from agent.compaction.sanitize import find_orphans
from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.errors import CompactionRefused
from agent.messages import (
    ChatMessage,
    assistant_message,
    is_real_user_message,
    system_message,
    tool_message,
    user_message,
)
from tests.agent.compaction.transcripts import call
from tests.fakes.provider import FakeProvider

CHAT = ("user", "assistant")
text = st.integers(min_value=0, max_value=3_000).map(lambda n: "w " * (n // 2))
events_st = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("reply"), text),
    st.tuples(st.just("calls"), st.lists(text, min_size=1, max_size=3)),
)


def _build(events: list[tuple[str, Any]], out: list[ChatMessage]) -> list[ChatMessage]:
    for kind, payload in events:
        if kind == "user":
            out.append(user_message(payload or "u"))
        elif kind == "reply":
            out.append(assistant_message(payload or "a"))
        else:
            calls = [call("tool", n=i) for i in range(len(payload))]
            out.append(assistant_message(None, calls))
            out += [
                tool_message(c["id"], "tool", body or "ok")
                for c, body in zip(calls, payload, strict=True)
            ]
    return out


def _stands_for(new: ChatMessage, old: ChatMessage, level: int) -> bool:
    """`new` is `old` itself, or (degraded) its tool result cleared or cut, never anything else."""
    if new is old:
        return True
    if old["role"] != "tool" or new.get("tool_call_id") != old["tool_call_id"]:
        return False
    cleared = level >= 1 and new.get("content") == PRUNED_TOOL_OUTPUT
    cut = level >= 3 and "were cut to fit the model's context window" in str(new.get("content"))
    return cleared or cut


def _check(before: list[ChatMessage], after: list[ChatMessage], detail: str, first_n: int) -> None:
    level = DEGRADE_DETAILS.index(detail)
    head = head_end(before, 1 if level >= 4 else first_n)  # the last resort keeps only system
    assert after[0].get("content", "").startswith(before[0]["content"])  # system (+ note)
    assert all(_stands_for(a, b, level) for a, b in zip(after[1:head], before[1:head], strict=True))
    markers = [i for i, m in enumerate(after) if is_marker(m)]
    if level < 3:
        assert markers == [head]
    assert markers in ([], [head]) and all(after[i]["role"] in CHAT for i in markers)
    tail = after[head + len(markers) :]
    suffix = before[len(before) - len(tail) :]
    assert all(_stands_for(new, old, level) for new, old in zip(tail, suffix, strict=True))
    users = [m for m in before if is_real_user_message(m)]
    if users:  # the newest request is never summarized, never cut
        assert any(m is users[-1] for m in after)
    assistants = [i for i, m in enumerate(before) if m["role"] == "assistant" and not is_marker(m)]
    if assistants:  # the newest whole exchange: the assistant message and its results
        last = assistants[-1]
        group = [
            before[last],
            *before[last + 1 : last + 1 + len(before[last].get("tool_calls") or ())],
        ]
        folded = level >= 4 and users and before.index(users[-1]) > last
        if not folded:  # only the last resort may fold an exchange older than the request
            assert all(any(_stands_for(m, g, level) for m in after) for g in group)
    assert find_orphans(after) == ([], [])
    for left, right in zip(after, after[1:], strict=False):
        if left["role"] == right["role"] and left["role"] in CHAT:
            # Only the last resort may put the marker next to the head's last message; it never
            # merges into the request after it.
            assert not is_marker(left) and (level >= 4 or not is_marker(right))
            if is_marker(right):
                continue
            i = next(i for i, m in enumerate(before) if m is left)
            assert before[i + 1] is right  # the pair was already adjacent before


async def _run(
    msgs: list[ChatMessage], engine: ContextCompressor, reason: str, first_n: int
) -> list[ChatMessage]:
    snapshot = copy.deepcopy(msgs)
    try:
        result = await engine.compress(msgs, reason=reason)
    except CompactionRefused as exc:
        note_event("refused: " + " ".join(exc.reason.split()[:3]))
        assert exc.reason and msgs == snapshot
        return msgs
    assert msgs == snapshot
    note_event(f"{result.outcome} {result.detail or 'verbatim tail'}")
    assert result.tokens_after < result.tokens_before
    if reason != "manual":  # an automatic pass makes the next request fit, with headroom
        assert result.tokens_after <= engine.threshold_tokens
    _check(msgs, result.messages, result.detail, first_n)
    return result.messages


@settings(
    max_examples=1_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    first=st.lists(events_st, min_size=0, max_size=4),
    events=st.lists(events_st, min_size=1, max_size=60),
    more=st.lists(events_st, min_size=1, max_size=25),
    window=st.sampled_from([6_000, 12_000, 40_000, 200_000]),
    protect_last_n=st.integers(min_value=1, max_value=12),
    min_users=st.integers(min_value=0, max_value=3),
    first_n=st.integers(min_value=1, max_value=5),
    lean=st.booleans(),
    reason=st.sampled_from(["threshold", "manual"]),
    fail=st.booleans(),
)
def test_invariants_hold_after_every_compress(
    first: list,
    events: list,
    more: list,
    window: int,
    protect_last_n: int,
    min_users: int,
    first_n: int,
    lean: bool,
    reason: str,
    fail: bool,
) -> None:
    """Head, newest request and exchange, whole tool pairs, role alternation and tail survive."""
    config = CompressionConfig(
        protect_last_n=protect_last_n,
        min_tail_user_messages=min_users,
        protect_first_n=first_n,
        tail_mode="lean" if lean else "legacy",
    )
    responses = iter([ValueError("no summary") if fail else "## Goal\nfirst", "## Goal\nsecond"])

    def respond(_: object) -> str:
        item = next(responses)
        if isinstance(item, Exception):
            raise item
        return item

    engine = ContextCompressor(
        config, summarizer=FakeProvider(responder=respond), summary_model="aux"
    )
    engine.update_model("m", window)
    msgs = _build(first + [("user", "start")] + events, [system_message("sys " * 50)])

    async def scenario() -> None:
        once = await _run(msgs, engine, reason, first_n)
        await _run(_build(more, list(once)), engine, reason, first_n)

    with capture_logs():  # keep thousands of telemetry lines out of the output
        asyncio.run(scenario())


big_text = st.integers(min_value=0, max_value=12_000).map(lambda n: "w " * (n // 2))
heavy_event = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("calls"), st.lists(big_text, min_size=1, max_size=3)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(heavy_event, min_size=4, max_size=40),
    window=st.sampled_from([8_000, 16_000, 32_000]),
    protect_last_n=st.integers(min_value=1, max_value=30),
)
def test_invariants_hold_when_the_tail_must_degrade(
    events: list, window: int, protect_last_n: int
) -> None:
    """Tool-heavy transcripts in small windows: degraded plans keep the same guarantees."""
    config = CompressionConfig(protect_last_n=protect_last_n)
    engine = ContextCompressor(
        config, summarizer=FakeProvider(responder=lambda _: "## Goal\ng"), summary_model="aux"
    )
    engine.update_model("m", window)
    msgs = _build([("user", "start"), *events], [system_message("sys")])
    with capture_logs():
        asyncio.run(_run(msgs, engine, "threshold", config.protect_first_n))
