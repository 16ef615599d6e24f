"""The offline simulator: a scripted model server, a seeded long conversation, and the replay."""

from __future__ import annotations

from sim.llm_server import FakeLLM, ManualClock, RecordedRequest, ToolCallSpec, Turn

__all__ = ["FakeLLM", "ManualClock", "RecordedRequest", "ToolCallSpec", "Turn"]
