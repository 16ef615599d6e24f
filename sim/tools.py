"""Simulated project tools for the replay: file reads, greps, edits and test runs, deterministic.

Each output is generated from the seed and the call's arguments (the same file reads the same
every time), sized like the real thing: a few hundred to a few thousand tokens. They replace the
runtime's terminal and file tools so a replay touches nothing on disk; `session_search` and
`recall` stay real.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from agent.archive.recall import recall_tool
from agent.providers.base import ToolSpec
from agent.tools.registry import Tool, ToolContext, ToolRegistry
from agent.tools.session_search import session_search_tool

__all__ = ["render_tool_output", "sim_tool_registry"]

_WORDS = (
    "request response retry budget delay pool connection stream frame header cookie proxy "
    "timeout cache policy entry window limit status body chunk socket handshake resolver "
    "metric counter label attempt jitter deadline"
).split()


def sim_tool_registry(seed: int) -> ToolRegistry:
    """read_file, grep, edit_file and run_tests (simulated) plus the real session_search and
    recall."""
    tools = [_tool(seed, name, description) for name, description in _SPECS.items()]
    return ToolRegistry([*tools, session_search_tool(), recall_tool()])


def render_tool_output(seed: int, name: str, args: dict[str, Any]) -> str:
    """The deterministic output of one simulated call."""
    rng = random.Random(_digest(seed, name, sorted(args.items())))
    match name:
        case "read_file":
            return _file_text(rng, str(args.get("path", "unknown.py")))
        case "grep":
            return _grep_text(rng, str(args.get("pattern", "")))
        case "edit_file":
            return f"Edited {args.get('path')}: replaced 1 occurrence of {args.get('symbol')} (+{rng.randint(3, 40)} -{rng.randint(1, 20)} lines)."
        case "run_tests":
            return _test_text(rng, str(args.get("target", "tests")))
        case _:
            return f"Error: unknown simulated tool {name!r}."


_SPECS = {
    "read_file": "Read a file of the project.",
    "grep": "Search the project for a pattern.",
    "edit_file": "Edit a symbol in a file.",
    "run_tests": "Run a test target and show the output.",
}


def _tool(seed: int, name: str, description: str) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        return render_tool_output(seed, name, args)[: ctx.max_output_chars]

    spec = ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": {}, "additionalProperties": True},
    )
    return Tool(spec=spec, handler=handler)


def _digest(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


def _file_text(rng: random.Random, path: str) -> str:
    lines = [f'"""{path}: {" ".join(rng.sample(_WORDS, 5))}."""', ""]
    for n in range(rng.randint(40, 260)):
        a, b, c = rng.sample(_WORDS, 3)
        match n % 9:
            case 0:
                lines.append(f"def {a}_{b}({c}: int, *, {a}: float = {rng.random():.2f}) -> int:")
            case 4:
                lines.append(f"    if {a} > {rng.randint(1, 500)}:  # {b} {c}")
            case 8:
                lines.append("")
            case _:
                lines.append(f"    {a}_{b} = {c}.{a}({b}, {rng.randint(0, 9999)})")
    return "\n".join(lines)


def _grep_text(rng: random.Random, pattern: str) -> str:
    hits = []
    for _ in range(rng.randint(6, 40)):
        path = f"src/hermes_net/{rng.choice(_WORDS)}.py"
        hits.append(
            f"{path}:{rng.randint(1, 900)}:    {pattern}({rng.choice(_WORDS)}, {rng.randint(0, 99)})"
        )
    return "\n".join(hits)


def _test_text(rng: random.Random, target: str) -> str:
    lines = [f"$ pytest -q {target}"]
    failures = rng.choice((0, 0, 1, 2))
    total = rng.randint(20, 160)
    for n in range(total):
        lines.append(f"{target}::test_{rng.choice(_WORDS)}_{n:03d} PASSED")
    for n in range(failures):
        lines.append(f"{target}::test_edge_{n} FAILED")
        lines += [f"E   assert {rng.randint(0, 9)} == {rng.randint(10, 99)}"] * rng.randint(3, 12)
    lines.append(f"{total - failures} passed, {failures} failed in {rng.uniform(0.5, 9):.2f}s")
    return "\n".join(lines)
