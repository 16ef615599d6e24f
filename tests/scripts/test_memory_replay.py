"""The multi-session memory replay (`replay_session.py --sessions N`, `sim.memory_replay`)."""

from __future__ import annotations

import json
from pathlib import Path

from sim.conversation import generate_conversation
from sim.memory_replay import MemoryReplayOptions, plan_facts, run_memory_replay


def test_facts_are_told_early_asked_late_and_unique() -> None:
    """Every fact is told in the first half of the sessions and asked in the second; its word
    is unique; "remember" facts sit in turns without tool calls."""
    options = MemoryReplayOptions(turns=200, sessions=4, facts=20)
    conversation = generate_conversation(seed=options.seed, turns=options.turns)
    facts = plan_facts(conversation, options)
    half = options.turns // 2
    assert len({f.answer for f in facts}) == 20
    assert all(f.told_turn < half <= f.asked_turn for f in facts)
    assert all(not conversation[f.told_turn].steps for f in facts if f.via == "tool")


async def test_a_small_multi_session_run_finds_what_was_kept(tmp_path: Path) -> None:
    """Through the real runtime: every fact given to the memory tool is found from a later
    session, the preferences about the person form the profile, and the profile's cost per
    request is reported with the assumptions."""
    options = MemoryReplayOptions(turns=80, sessions=4, facts=8, context_window=32_000)
    planned = plan_facts(generate_conversation(seed=options.seed, turns=80), options)
    by_tool = sum(1 for f in planned if f.via == "tool")
    result = await run_memory_replay(options, tmp_path)
    facts = result["facts"]
    assert by_tool >= 2 and facts["found_by_path"]["tool"] == f"{by_tool}/{by_tool}"
    assert facts["told"] == 8 and facts["stored"] >= facts["found_in_memory"] >= by_tool
    assert result["sessions"] == 4
    assert len(result["profile"]["entries"]) == 3
    assert result["profile"]["requests"] > 80
    assert 0 < result["profile"]["tokens_per_request_mean"] <= 400
    assert any("top 5" in a for a in result["assumptions"])
    json.dumps(result)
