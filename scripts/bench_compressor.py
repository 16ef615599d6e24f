"""Benchmark the compressor's own work (no model time) and prints one JSON object.

For transcripts of 200, 2,000 and 20,000 messages: one `should_compress()` with a valid usage
report (the normal case), one without (the estimate path), and one `compress()` whose summarizer
answers instantly, so what is measured is the bookkeeping. Best of several runs, milliseconds.
Run: python scripts/bench_compressor.py
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.config import CompressionConfig  # noqa: E402
from agent.context_compressor import ContextCompressor  # noqa: E402
from agent.messages import (  # noqa: E402
    ChatMessage,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)
from agent.providers.base import ProviderReply, ProviderRequest, Usage  # noqa: E402
from agent.tokens import estimate_messages_tokens_rough  # noqa: E402

SIZES = (200, 2_000, 20_000)
WINDOW_PER_TOKEN = 1.2
"""Each transcript gets a window 1.2x its size, so it sits over the threshold (0.75 or 0.50)."""


class InstantProvider:
    """Answers every summary request at once with a fixed summary."""

    name = "instant"

    async def complete(self, request: ProviderRequest, *, on_text: object = None) -> ProviderReply:
        return ProviderReply(
            message=assistant_message("## Goal\nbenchmark\n## Progress\n### Done\n- things"),
            usage=Usage(input_tokens=1, output_tokens=1),
            stop_reason="end",
            model=request.model,
        )

    async def aclose(self) -> None:
        return None


def transcript(size: int) -> list[ChatMessage]:
    """System, then user turns each followed by a tool exchange and a reply (~4 messages a turn)."""
    msgs: list[ChatMessage] = [system_message("You are Hermes. " * 40)]
    turn = 0
    while len(msgs) < size:
        call_id = f"call_{turn}"
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
        }
        msgs += [
            user_message(f"request {turn}: " + "please look at this " * 10),
            assistant_message(None, [call]),  # type: ignore[list-item]
            tool_message(call_id, "read_file", "line of code\n" * 60),
            assistant_message("Here is what I found. " * 8),
        ]
        turn += 1
    return msgs[:size]


def best_ms(fn, runs: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(min(times), 4)


def engine(window: int) -> ContextCompressor:
    eng = ContextCompressor(CompressionConfig(), summarizer=InstantProvider(), summary_model="aux")
    eng.update_model("bench-model", window)
    return eng


def bench(size: int) -> dict[str, object]:
    msgs = transcript(size)
    window = int(estimate_messages_tokens_rough(msgs) * WINDOW_PER_TOKEN)
    warm = engine(window)
    warm.update_from_usage(Usage(input_tokens=100_000), msgs[:-2])
    cold = engine(window)
    runs = 5 if size >= 20_000 else 20
    compressor = engine(window)
    compress_ms = best_ms(lambda: asyncio.run(compressor.compress(msgs)), runs)
    loop_ms = best_ms(lambda: asyncio.run(asyncio.sleep(0)), runs)
    result = asyncio.run(engine(window).compress(msgs))
    return {
        "messages": size,
        "window": window,
        "should_compress_ms_with_usage": best_ms(lambda: warm.should_compress(msgs), runs),
        "should_compress_ms_estimate": best_ms(lambda: cold.should_compress(msgs), runs),
        "compress_bookkeeping_ms": round(max(0.0, compress_ms - loop_ms), 4),
        "messages_after": result.messages_after,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
    }


def main() -> None:
    # Only the JSON goes to stdout: telemetry lines are dropped while measuring.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    results = [bench(size) for size in SIZES]
    targets = {"should_compress_ms_at_2000": 1.0, "compress_bookkeeping_ms_at_2000": 50.0}
    print(json.dumps({"results": results, "targets": targets}, indent=2))


if __name__ == "__main__":
    main()
