"""Agent events: frozen values that keep the string names and payloads they had as dicts.

The names and dict shapes below are the ones `AIAgent` emitted before events were typed
(`agent/agent.py`, `agent/adoption.py`); anything that still speaks strings (logs, plugins) reads
the same thing through `event.name` and `event.payload()`.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

from agent import events
from agent.events import (
    AgentEvent,
    CompactionBegan,
    CompactionCommitted,
    EngineSwitched,
    ModelSwitched,
    NativeCompaction,
    SessionReloaded,
    ToolFinished,
    ToolStarted,
)

COMMITTED = CompactionCommitted(
    session_id="new",
    old_session_id="old",
    reason="manual",
    kind="batch",
    tokens_before=38_000,
    tokens_after=9_000,
    messages_before=41,
    messages_after=12,
    seconds=3.1,
)


@pytest.mark.parametrize(
    ("event", "name", "payload"),
    [
        (SessionReloaded(session_id="s", version=7), "session:reloaded", {"session_id": "s", "version": 7}),
        (ModelSwitched(model="m", context_length=8192), "model:switch", {"model": "m", "context_length": 8192}),
        (EngineSwitched(session_id="s", engine="lcm"), "engine:switch", {"session_id": "s", "engine": "lcm"}),
        (CompactionBegan(session_id="s", reason="hygiene"), "compaction:start", {"session_id": "s", "reason": "hygiene"}),
        (
            COMMITTED,
            "session:compress",
            {
                "session_id": "new", "in_place": False, "old_session_id": "old", "reason": "manual",
                "kind": "batch", "tokens_before": 38_000, "tokens_after": 9_000,
                "messages_before": 41, "messages_after": 12, "seconds": 3.1,
            },
        ),
        (
            ToolStarted(session_id="s", tool="terminal", arguments="ls -la"),
            "tool:start",
            {"session_id": "s", "name": "terminal", "arguments": "ls -la"},
        ),
        (
            ToolFinished(session_id="s", tool="terminal", result="a\nb"),
            "tool:end",
            {"session_id": "s", "name": "terminal", "result": "a\nb"},
        ),
        (
            NativeCompaction(session_id="s", reason="threshold"),
            "session:compress",
            {"session_id": "s", "in_place": True, "old_session_id": "", "reason": "threshold", "native": True},
        ),
    ],
)  # fmt: skip
def test_each_event_keeps_its_old_name_and_payload(
    event: AgentEvent, name: str, payload: dict[str, object]
) -> None:
    """`name` and `payload()` are what the string-and-dict events carried."""
    assert event.name == name
    assert event.payload() == payload


def test_a_compaction_in_place_has_no_old_session() -> None:
    """`in_place` follows from `old_session_id`, so the two can never disagree."""
    assert dataclasses.replace(COMMITTED, old_session_id="").in_place
    assert not COMMITTED.in_place


def test_events_are_frozen_slotted_and_keyword_only() -> None:
    """Every member of the union is an immutable value built by keyword."""
    members = typing.get_args(AgentEvent)
    assert set(members) == {
        getattr(events, n)
        for n in events.__all__
        if n not in ("AgentEvent", "CompactionReason", "EventSink")
    }
    for cls in members:
        assert cls.__dataclass_params__.frozen, cls
        assert all(f.kw_only for f in dataclasses.fields(cls)), cls
        assert "__slots__" in cls.__dict__, cls
    with pytest.raises(dataclasses.FrozenInstanceError):
        COMMITTED.seconds = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        ModelSwitched("m", 8192)  # type: ignore[call-arg]
