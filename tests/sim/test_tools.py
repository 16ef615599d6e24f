"""The simulated project tools: deterministic, realistically sized, truncated like real tools."""

from __future__ import annotations

import json

import pytest

from agent.tools.registry import ToolContext
from sim.llm_server import tokens_of_text
from sim.tools import render_tool_output, sim_tool_registry


@pytest.mark.parametrize(
    ("name", "args", "low", "high"),
    [
        ("read_file", {"path": "src/hermes_net/retry.py"}, 300, 6000),
        ("grep", {"pattern": "backoff_delay"}, 50, 1200),
        ("run_tests", {"target": "tests/test_pool.py"}, 150, 3000),
        ("edit_file", {"path": "src/a.py", "symbol": "f"}, 5, 100),
    ],
)
def test_outputs_are_deterministic_and_sized(
    name: str, args: dict[str, str], low: int, high: int
) -> None:
    """The same call renders the same text, sized like the real tool's output."""
    text = render_tool_output(7, name, args)
    assert text == render_tool_output(7, name, dict(args))
    assert low <= tokens_of_text(text) <= high


def test_other_seed_other_file() -> None:
    """The seed changes the generated project."""
    args = {"path": "src/hermes_net/pool.py"}
    assert render_tool_output(1, "read_file", args) != render_tool_output(2, "read_file", args)


async def test_registry_runs_calls_and_truncates(tmp_path: object) -> None:
    """The registry runs simulated calls through the real ToolRegistry and honours the output cap."""
    registry = sim_tool_registry(7)
    assert set(registry.names()) == {
        "read_file",
        "grep",
        "edit_file",
        "run_tests",
        "session_search",
        "recall",
    }
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "src/x.py"})},
    }
    text = await registry.run(call, ToolContext(session_id="s", max_output_chars=500))
    assert len(text) == 500
