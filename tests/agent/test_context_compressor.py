"""ContextCompressor: the seed's worked example, failure policy, iteration, trigger, telemetry."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
import structlog

from agent.archive.anchors import anchors_for_ids, split_index
from agent.compaction.markers import COMPACTION_NOTE, parse_summary_marker
from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.errors import (
    BadRequest,
    CompactionRefused,
    ProviderAuthError,
    ProviderUnavailable,
    RateLimited,
)
from agent.messages import ChatMessage, assistant_message, user_message
from agent.providers.base import ProviderRequest, Usage
from agent.tokens import estimate_messages_tokens_rough
from tests.agent.compaction.transcripts import exchange, persisted, worked_example
from tests.fakes.provider import FakeProvider, make_reply

SUMMARY = "## Goal\nSet up a FastAPI project\n## Progress\n### Done\n- main.py written"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _compressor(
    provider: FakeProvider, *, window: int = 200_000, clock: FakeClock | None = None, **cfg: object
) -> ContextCompressor:
    engine = ContextCompressor(
        CompressionConfig(**cfg),  # type: ignore[arg-type]
        summarizer=provider,
        summary_model="aux-model",
        summary_timeout_s=0.2,
        clock=clock or FakeClock(),
    )
    engine.update_model("main-model", window)
    return engine


async def test_worked_example_45_messages_to_about_25() -> None:
    """The seed's 45-message, ~95K-token session compacts to ~25 messages and ~45K tokens."""
    provider = FakeProvider().script(SUMMARY)
    engine = _compressor(provider)
    msgs = persisted(worked_example())
    result = await engine.compress(msgs)
    assert len(msgs) == 45 and 85_000 <= result.tokens_before <= 100_000
    assert 22 <= result.messages_after <= 28
    assert 35_000 <= result.tokens_after <= 50_000
    out = result.messages
    assert out[0]["content"].endswith(COMPACTION_NOTE) and "_id" not in out[0]
    assert out[1] is msgs[1]  # the first request stays verbatim, with its row id
    marker = next(m for m in out if m.get("_kind") == "summary")
    body, index = split_index(parse_summary_marker(marker) or "")
    assert body == SUMMARY and "_id" not in marker
    folded = [m["_id"] for m in msgs[1:] if not any(m is o for o in out)]
    assert index == anchors_for_ids(folded) and len(folded) > 10  # the rows it stands for
    assert out[-1] is msgs[-1] and out[-1]["content"] == "Great, also add error handling"
    assert out[-5]["content"] == "Fix the failing tests"
    request = provider.requests[0]
    assert request.model == "aux-model" and "## Critical Context" in request.messages[1]["content"]
    assert result.outcome == "compressed" and result.reason == "threshold"
    provider.assert_complete()


def _transient_failures() -> list[tuple[str, object]]:
    slow_reply = make_reply("late")

    async def too_slow(_: ProviderRequest) -> object:
        await asyncio.sleep(5)
        return slow_reply

    return [
        ("auth", ProviderAuthError("fake", "aux-model")),
        ("network", ProviderUnavailable("fake", "aux-model", "connection reset")),
        ("overload", RateLimited("fake", "aux-model", retry_after_s=3)),
        ("timeout", too_slow),
        ("empty", make_reply("   ")),
        ("truncated", make_reply("## Goal\nhalf a sent", stop_reason="max_tokens")),
    ]


@pytest.mark.parametrize(("kind", "item"), _transient_failures(), ids=lambda v: str(v)[:12])
async def test_transient_failure_leaves_transcript_untouched(kind: str, item: object) -> None:
    """Auth, network, overload, timeout, empty or truncated summary: refused, nothing lost, backoff."""
    clock = FakeClock()
    provider = FakeProvider().script(item)  # type: ignore[arg-type]
    engine = _compressor(provider, window=20_000, clock=clock)
    msgs = persisted(worked_example())
    snapshot = copy.deepcopy(msgs)
    assert engine.should_compress(msgs)
    with pytest.raises(CompactionRefused) as info:
        await engine.compress(msgs)
    assert info.value.reason and msgs == snapshot
    assert engine.status().failures == 1 and engine.status().last_outcome == "refused"
    assert not engine.should_compress(msgs)  # backing off
    clock.now += 10
    engine.should_compress(msgs)
    assert engine.should_compress(msgs)  # backoff over: try again
    provider.assert_complete()


@pytest.mark.parametrize(
    "error", [BadRequest("fake", "aux-model", "bad field"), ValueError("boom")]
)
async def test_other_failures_fall_back_to_a_local_summary(error: Exception) -> None:
    """Any other summary failure yields a deterministic summary with real facts, not a placeholder."""
    provider = FakeProvider().script(error)
    engine = _compressor(provider)
    result = await engine.compress(worked_example())
    marker = next(m for m in result.messages if m.get("_kind") == "summary")
    text = parse_summary_marker(marker) or ""
    assert result.outcome == "local_summary" and type(error).__name__ in text
    assert "app/module_0.py" in text and "mkdir project" not in text  # head stays out of it
    assert "write_file" in text or "main.py" in text
    assert engine.status().local_summaries == 1


def _grow(msgs: list[ChatMessage], turns: int) -> list[ChatMessage]:
    out = list(msgs)
    for i in range(turns):
        out.append(user_message(f"next step {i}"))
        out += exchange("read_file", "content " * 2_000, path=f"later_{i}.py")
        out.append(assistant_message(f"done with step {i}"))
    return out


async def test_second_compaction_updates_the_previous_summary() -> None:
    """The next pass asks the model to UPDATE the summary it wrote before."""
    provider = FakeProvider().script(SUMMARY, "## Goal\nupdated")
    engine = _compressor(provider)
    first = await engine.compress(worked_example())
    second = await engine.compress(_grow(first.messages, 12))
    prompt = provider.requests[1].messages[1]["content"]
    assert "UPDATE the existing summary" in prompt and SUMMARY in prompt
    assert sum(m.get("_kind") == "summary" for m in second.messages) == 1
    assert second.messages[0] is first.messages[0]  # note added once: system prompt byte-stable


async def test_previous_summary_is_recovered_from_the_transcript() -> None:
    """A fresh compressor (new process) finds the previous summary in the newest marker."""
    first = await _compressor(FakeProvider().script(SUMMARY)).compress(worked_example())
    provider = FakeProvider().script("## Goal\nupdated")
    await _compressor(provider).compress(_grow(first.messages, 12), focus="error handling")
    prompt = provider.requests[0].messages[1]["content"]
    assert "UPDATE the existing summary" in prompt and SUMMARY in prompt
    assert "<focus>\nerror handling\n</focus>" in prompt


async def test_compress_never_mutates_its_input() -> None:
    """The caller's list and dicts are unchanged after a successful pass."""
    msgs = persisted(worked_example())
    snapshot = copy.deepcopy(msgs)
    await _compressor(FakeProvider().script(SUMMARY)).compress(msgs)
    assert msgs == snapshot


def test_trigger_uses_real_prompt_tokens_while_they_describe_the_transcript() -> None:
    """Real usage over the threshold triggers; a replaced transcript falls back to the estimate."""
    engine = _compressor(FakeProvider())
    msgs = [user_message("x" * 20_000) for _ in range(28)] + [assistant_message("hello")]
    assert not engine.should_compress(msgs)  # ~140K rough, under the 150K threshold
    engine.update_from_usage(Usage(input_tokens=1_000, cache_read_tokens=150_000), msgs)
    assert engine.status().last_prompt_tokens == 151_000
    assert engine.should_compress([*msgs, user_message("more")])  # still a prefix: real tokens
    assert not engine.should_compress([user_message("other"), assistant_message("x")])


async def test_after_a_compaction_the_estimate_is_used_until_the_next_usage() -> None:
    """Usage from before a pass no longer applies to the compacted transcript."""
    engine = _compressor(FakeProvider().script(SUMMARY))
    msgs = worked_example()
    engine.update_from_usage(Usage(input_tokens=160_000), msgs)
    assert engine.should_compress(msgs)
    result = await engine.compress(msgs)
    assert engine.status().last_prompt_tokens is None
    assert not engine.should_compress(result.messages)


def test_calibration_keeps_non_latin_text_from_being_under_counted() -> None:
    """After usage shows 2x the rough count, a Cyrillic transcript under the rough threshold triggers."""
    text = "Привет, как дела? Сегодня мы обсуждаем архитектуру. " * 400  # ~5K rough tokens
    msgs = [user_message(text) for _ in range(32)]  # ~165K rough in total
    plain = _compressor(FakeProvider(), window=400_000)  # threshold 300K
    calibrated = _compressor(FakeProvider(), window=400_000)
    for n in (4, 12):
        rough = estimate_messages_tokens_rough(msgs[:n])
        calibrated.update_from_usage(Usage(input_tokens=2 * rough + 3_000), msgs[:n])
    other = [user_message(text) for _ in range(32)]  # a transcript the reports do not describe
    assert not plain.should_compress(other)
    assert calibrated.should_compress(other)
    assert calibrated.status().token_ratio == pytest.approx(2.0, rel=0.01)


def test_model_switch_re_resolves_the_threshold() -> None:
    """Per-model overrides apply on every switch; a small window gets the 0.75 floor."""
    engine = _compressor(FakeProvider(), window=1_000_000, model_thresholds={"big": 0.3})
    engine.update_model("big-model", 1_000_000)
    assert engine.threshold_tokens == 300_000
    engine.update_model("small-model", 200_000)
    assert engine.threshold_tokens == 150_000 and engine.context_length == 200_000
    engine.update_model("other", 1_000_000)
    assert engine.threshold_tokens == 500_000


def test_disabled_compression_never_triggers() -> None:
    """compression.enabled false: should_compress is always False."""
    engine = _compressor(FakeProvider(), enabled=False)
    engine.update_from_usage(Usage(input_tokens=199_000), [user_message("x")])
    assert not engine.should_compress([user_message("x")])


async def test_useless_pass_judged_by_next_usage_backs_off() -> None:
    """If the next real usage is still over the threshold, the pass counts as failed."""
    engine = _compressor(FakeProvider().script(SUMMARY))
    result = await engine.compress(worked_example())
    engine.update_from_usage(Usage(input_tokens=155_000), result.messages)
    assert engine.status().failures == 1
    assert not engine.should_compress(result.messages)


async def test_telemetry_is_one_content_free_line() -> None:
    """One compaction_finished event with the counts; no message text or secret in it."""
    msgs = worked_example()
    msgs[5]["content"] = "secret sk-live-1234567890abcdef in the output " + "x" * 300
    engine = _compressor(FakeProvider().script(SUMMARY))
    with structlog.testing.capture_logs() as logs:
        result = await engine.compress(msgs)
    events = [e for e in logs if e["event"] == "compaction_finished"]
    assert len(events) == 1
    event = events[0]
    for key in (
        "tokens_before",
        "tokens_after",
        "messages_before",
        "messages_after",
        "summary_tokens",
        "duration_ms",
        "outcome",
        "reason",
    ):
        assert key in event
    assert event["tokens_after"] == result.tokens_after and event["log_level"] == "info"
    assert "sk-live" not in str(logs) and "FastAPI" not in str(logs)


def test_status_and_tools() -> None:
    """The compressor offers no tools and reports its budgets and counters."""
    engine = _compressor(FakeProvider())
    status = engine.status()
    assert engine.tools() == []
    assert status.threshold_tokens == 150_000 and status.tail_token_budget == 30_000
    assert status.max_summary_tokens == 10_000 and status.compactions == 0


def test_usage_for_a_cache_marked_copy_still_describes_the_transcript() -> None:
    """The request carries deep copies with cache_control blocks; real tokens still apply."""
    engine = _compressor(FakeProvider())
    msgs = [user_message("x" * 20_000) for _ in range(28)] + [user_message("latest")]
    sent = copy.deepcopy(msgs)
    sent[-1]["content"] = [
        {"type": "text", "text": "latest", "cache_control": {"type": "ephemeral"}}
    ]
    engine.update_from_usage(Usage(input_tokens=151_000), sent)
    assert engine.should_compress([*msgs, assistant_message("reply")])
    changed = [*msgs[:27], user_message("latest")]  # same text, not the message that was sent
    assert engine.current_tokens(changed) < 150_000 < engine.current_tokens(msgs)


async def test_a_key_the_summary_model_writes_is_redacted() -> None:
    """Whatever the summarizer returns passes the one redactor before it becomes the marker."""
    leak = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    provider = FakeProvider().script(f"{SUMMARY}\n## Critical Context\nGH_TOKEN={leak}")
    result = await _compressor(provider).compress(worked_example())
    text = json.dumps(result.messages)
    assert leak not in text and "GH_TOKEN=[REDACTED]" in text
