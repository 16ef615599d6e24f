"""Lesson: compaction loops when the protected tail alone exceeds the threshold (108 in 11 hours)."""

from __future__ import annotations

from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.errors import CompactionRefused
from agent.messages import ChatMessage, assistant_message, system_message, user_message
from agent.providers.base import Usage
from agent.tokens import estimate_messages_tokens_rough
from tests.agent.compaction.transcripts import exchange
from tests.fakes.provider import FakeProvider

TURNS = 300


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _drive(engine: ContextCompressor, msgs: list[ChatMessage], clock: Clock, report) -> int:  # type: ignore[no-untyped-def]
    """Run TURNS agent steps: check, maybe compact, call the 'model', report usage."""
    attempts = 0
    for step in range(TURNS):
        clock.now += 2.0
        if engine.should_compress(msgs):
            attempts += 1
            try:
                msgs = (await engine.compress(msgs)).messages
            except CompactionRefused:
                pass
        engine.update_from_usage(Usage(input_tokens=report(msgs)), msgs)
        msgs = [*msgs, assistant_message(f"step {step} done")]
    return attempts


async def test_tail_alone_over_threshold_does_not_compact_every_turn() -> None:
    """A pasted prompt bigger than the threshold: a few refused attempts, backing off, no model calls."""
    clock = Clock()
    provider = FakeProvider()
    engine = ContextCompressor(
        CompressionConfig(), summarizer=provider, summary_model="aux", clock=clock
    )
    engine.update_model("m", 20_000)  # threshold 15,000 tokens
    msgs: list[ChatMessage] = [
        system_message("sys"),
        user_message("hi"),
        assistant_message("hello"),
    ]
    for i in range(10):
        msgs += [user_message(f"q{i}"), *exchange("terminal", "out " * 200, command="ls")]
    msgs.append(user_message("please review: " + "code " * 16_000))  # ~16K tokens, newest request
    attempts = await _drive(engine, msgs, clock, estimate_messages_tokens_rough)
    assert attempts <= 12, attempts
    assert provider.requests == []  # refused before any summary call
    assert engine.status().failures == attempts


async def test_useless_compactions_back_off_when_real_usage_stays_high() -> None:
    """If every pass is followed by usage still over the threshold, passes thin out exponentially."""
    clock = Clock()
    provider = FakeProvider(responder=lambda _: "## Goal\nkeep going")
    engine = ContextCompressor(
        CompressionConfig(), summarizer=provider, summary_model="aux", clock=clock
    )
    engine.update_model("m", 20_000)
    msgs: list[ChatMessage] = [
        system_message("sys"),
        user_message("hi"),
        assistant_message("hello"),
    ]
    for i in range(30):
        msgs += [user_message(f"q{i}"), *exchange("terminal", "out " * 400, command="ls")]
    attempts = await _drive(engine, msgs, clock, lambda _: 16_000)  # the provider always says 16K
    assert 1 <= attempts <= 12, attempts
    assert len(provider.requests) <= attempts
