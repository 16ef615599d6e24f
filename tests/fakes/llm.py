"""The fake LLM server for tests: a re-export of `sim.llm_server`, its one implementation."""

from __future__ import annotations

from sim.llm_server import FakeLLM, ManualClock, RecordedRequest, ToolCallSpec, Turn

__all__ = ["FakeLLM", "ManualClock", "RecordedRequest", "ToolCallSpec", "Turn"]
