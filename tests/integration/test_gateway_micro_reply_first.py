"""Through the gateway runner, a turn's reply is sent before its micro-compaction pass starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import RecordingSink, inbound, make_config, start_runtime


class OrderedSink(RecordingSink):
    """Records, in one shared list, the moment the reply went out."""

    def __init__(self, events: list[str], turn: int) -> None:
        super().__init__()
        self._events, self._turn = events, turn

    async def finish(self, text: str) -> None:
        await super().finish(text)
        self._events.append(f"reply {self._turn}")


async def test_reply_goes_out_before_the_pass(tmp_path: Path, monkeypatch: Any) -> None:
    """Every micro-compaction call comes after the reply of the turn that scheduled it."""
    events: list[str] = []

    def responder(body: dict[str, Any], api: str) -> Turn | None:
        if "[REDACTED]" in json.dumps(body):  # a fold, defrag or summary prompt
            events.append("pass")
            return Turn(text="## Goal\nrolling summary of earlier work")
        return None

    async with FakeLLM(responder=responder) as llm:
        config = make_config(
            llm,
            tmp_path / "state.db",
            model={"context_length": 6_000},
            compression={
                "micro_compact": True,
                "micro_compact_when": "always",
                "protect_first_n": 1,
                "protect_last_n": 2,
                "target_ratio": 0.05,
            },
        )
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            for turn in range(8):
                events.append(f"send {turn}")
                outcome = await runner.submit(
                    inbound(f"step {turn}: " + "details " * 60), OrderedSink(events, turn)
                )
                agent = await runner.agent_for(outcome.session_id)
                await agent.wait_background()  # settle this turn's pass before the next turn
            await runner.stop()
    assert "pass" in events
    for i, event in enumerate(events):
        if event == "pass":
            previous = [e for e in events[:i] if e != "pass"][-1]
            assert previous.startswith("reply"), events
