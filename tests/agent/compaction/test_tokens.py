"""Rough token estimates and per-model calibration."""

from __future__ import annotations

import pytest

from agent.messages import assistant_message, user_message
from agent.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    TokenCalibrator,
    estimate_message_tokens_rough,
    estimate_messages_tokens_rough,
    estimate_tokens_rough,
)
from tests.agent.compaction.transcripts import call


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("abc", 1), ("abcd", 1), ("abcde", 2)])
def test_chars_over_four_rounded_up(text: str, tokens: int) -> None:
    """The baseline is chars/4, rounded up."""
    assert estimate_tokens_rough(text) == tokens


def test_message_counts_content_tool_args_and_overhead() -> None:
    """Tool-call arguments and blocks count; every message pays the framing overhead."""
    plain = user_message("x" * 400)
    assert estimate_message_tokens_rough(plain) == 100 + MESSAGE_OVERHEAD_TOKENS
    with_call = assistant_message(None, [call("read_file", path="y" * 400)])
    assert estimate_message_tokens_rough(with_call) > 100
    blocks = {"role": "user", "content": [{"type": "text", "text": "z" * 40}, {"type": "image"}]}
    assert estimate_message_tokens_rough(blocks) == 10 + MESSAGE_OVERHEAD_TOKENS + 1_000  # type: ignore[arg-type]
    assert estimate_messages_tokens_rough([plain, plain]) == 2 * (100 + MESSAGE_OVERHEAD_TOKENS)


def test_calibration_learns_growth_ratio_and_fixed_overhead() -> None:
    """From two reports the ratio comes from the growth and the rest is fixed overhead."""
    cal = TokenCalibrator()
    cal.observe("m", rough=1_000, real=6_500)  # 5,000 of tool schemas + 1.5x text
    assert cal.ratio("m") == 1.0
    cal.observe("m", rough=3_000, real=9_500)
    assert cal.ratio("m") == pytest.approx(1.5)
    assert cal.overhead("m") == 5_000
    assert cal.scale("m", 1_000) == 1_500
    assert cal.estimate("m", [user_message("x" * 3_984)]) == 1_500 + 5_000
    assert cal.ratio("other") == 1.0 and cal.estimate("other", []) == 0


@pytest.mark.parametrize(
    ("reports", "ratio"),
    [
        ([(1_000, 1_000), (1_100, 5_000)], 1.0),  # growth under 256 rough tokens is ignored
        ([(1_000, 1_000), (5_000, 100_000)], 6.0),  # clamped high
        ([(1_000, 1_000), (5_000, 1_100)], 0.5),  # clamped low
        ([(5_000, 5_000), (1_000, 1_000), (2_000, 3_000)], 2.0),  # shrink resets the baseline
    ],
)
def test_calibration_ignores_noise_and_clamps(reports: list[tuple[int, int]], ratio: float) -> None:
    """Small growth is ignored, extreme samples are clamped, a shrink starts a new baseline."""
    cal = TokenCalibrator()
    for rough, real in reports:
        cal.observe("m", rough, real)
    assert cal.ratio("m") == pytest.approx(ratio)
