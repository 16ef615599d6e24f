"""Invariants of archive_and_compact: one transaction, tail never duplicated, no half states."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from sqlalchemy import text

from agent.errors import ConcurrentModification
from agent.messages import assistant_message, system_message, tool_message, user_message
from state import SqlSessionStore
from tests.state.fixtures import StoreTarget, open_store, pg_schema, store, store_target

__all__ = ["open_store", "pg_schema", "store", "store_target"]


def _turn(i: int) -> list[Any]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    return [
        user_message(f"request {i}"),
        assistant_message(None, [call]),
        tool_message(f"c{i}", "run", f"output {i}"),
        assistant_message(f"done {i}"),
    ]


def _summary(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"[summary {n}]", "_kind": "summary"}


async def _rows(store: SqlSessionStore, session_id: str) -> list[tuple[Any, ...]]:
    """Every row of the session straight from the table: (id, position, active, compacted, content)."""
    async with store._engine.connect() as conn:
        result = await conn.execute(
            text(
                "SELECT id, position, active, compacted, content FROM messages "
                "WHERE session_id = :s ORDER BY id"
            ),
            {"s": session_id},
        )
        return [(r[0], r[1], bool(r[2]), bool(r[3]), r[4]) for r in result]


async def _snapshot(store: SqlSessionStore, session_id: str) -> tuple[Any, ...]:
    info = await store.sessions.get_session(session_id)
    return (await _rows(store, session_id), info)


async def test_repeated_compactions_never_duplicate_the_carried_tail(
    store: SqlSessionStore,
) -> None:
    """Ten compactions carrying the newest exchange archive each row once and copy nothing."""
    info = await store.sessions.create_session()
    transcript = [system_message("you are hermes"), *_turn(0)]
    await store.transcript.append(info.id, transcript)
    for round_ in range(1, 11):
        transcript += _turn(round_)
        await store.transcript.append(info.id, transcript)
        new_active = [transcript[0], _summary(round_), *transcript[-4:]]
        await store.transcript.archive_and_compact(info.id, new_active)
        transcript = new_active
    rows = await _rows(store, info.id)
    contents = [r[4] for r in rows if r[4] is not None]
    assert len(rows) == 1 + 11 * 4 + 10, "each message and summary stored exactly once"
    assert len(contents) == len(set(contents))
    archived = [r for r in rows if not r[2]]
    assert all(r[3] for r in archived)
    assert len(archived) == 10 * 4 + 9, "every turn but the last, and every old summary"
    loaded = await store.transcript.load_active(info.id)
    assert [m["content"] for m in loaded] == [
        "you are hermes",
        "[summary 10]",
        "request 10",
        None,
        "output 10",
        "done 10",
    ]
    session = await store.sessions.get_session(info.id)
    assert session.active_messages == 6
    active_positions = sorted(r[1] for r in rows if r[2])
    assert max(r[1] for r in rows) == active_positions[-1], "active rows are the newest positions"
    assert active_positions == list(range(active_positions[0], active_positions[0] + 6))


async def test_changed_system_prompt_is_archived_and_reinserted(store: SqlSessionStore) -> None:
    """A stale `_id` with new content archives the old row and inserts the new text once."""
    info = await store.sessions.create_session()
    msgs = [system_message("base prompt"), *_turn(1)]
    await store.transcript.append(info.id, msgs)
    old_id = msgs[0]["_id"]
    new_system = {**msgs[0], "content": "base prompt\n\n[note: compacted]"}
    new_active = [new_system, _summary(1), *msgs[-2:]]
    await store.transcript.archive_and_compact(info.id, new_active)
    assert new_system["_id"] != old_id and new_system["_persisted"] is True
    rows = {r[0]: r for r in await _rows(store, info.id)}
    assert rows[old_id][2:] == (False, True, "base prompt")
    assert rows[new_system["_id"]][2:] == (True, False, "base prompt\n\n[note: compacted]")
    assert [r[2] for r in (rows[msgs[-2]["_id"]], rows[msgs[-1]["_id"]])] == [True, True]


async def test_resume_loads_the_summary_without_what_it_replaced(store: SqlSessionStore) -> None:
    """After a compaction, the active transcript is exactly new_active, in its order."""
    info = await store.sessions.create_session()
    msgs = [system_message("s"), *_turn(1), *_turn(2)]
    await store.transcript.append(info.id, msgs)
    new_active = [msgs[0], *msgs[-4:-2], _summary(1), *msgs[-2:]]
    await store.transcript.archive_and_compact(info.id, new_active)
    loaded = await store.transcript.load_active(info.id)
    assert [m["_id"] for m in loaded] == [m["_id"] for m in new_active]
    assert [m["content"] for m in loaded] == [m["content"] for m in new_active]
    assert sum(m["_kind"] == "summary" for m in loaded) == 1
    assert not {m["_id"] for m in msgs[1:5]} & {m["_id"] for m in loaded}


@pytest.mark.parametrize("step", ["locked", "renumbered", "archived", "inserted", "counted"])
async def test_failure_at_any_step_leaves_everything_as_before(
    store_target: StoreTarget, step: str
) -> None:
    """An exception between any two steps rolls back the rows and leaves the list unstamped."""

    def hook(at: str) -> None:
        if at == f"archive_and_compact:{step}":
            raise RuntimeError(f"injected at {at}")

    store = await store_target.open(fault_hook=hook)
    try:
        info = await store.sessions.create_session()
        msgs = [system_message("s"), *_turn(1), *_turn(2)]
        await store.transcript.append(info.id, msgs)
        before = await _snapshot(store, info.id)
        new_active = [{**msgs[0], "content": "s2"}, _summary(1), *msgs[-2:]]
        pristine = copy.deepcopy(new_active)
        with pytest.raises(RuntimeError, match="injected"):
            await store.transcript.archive_and_compact(info.id, new_active)
        assert await _snapshot(store, info.id) == before
        assert new_active == pristine
        loaded = await store.transcript.load_active(info.id)
        assert [m["_id"] for m in loaded] == [m["_id"] for m in msgs]
    finally:
        await store.aclose()


@pytest.mark.parametrize("step", ["inserted", "routed"])
async def test_failed_rotation_leaves_the_parent_untouched(
    store_target: StoreTarget, step: str
) -> None:
    """A rotation that fails creates no child, ends nothing and stamps nothing."""

    def hook(at: str) -> None:
        if at == f"rotate:{step}":
            raise RuntimeError("injected")

    store = await store_target.open(fault_hook=hook)
    try:
        parent = await store.sessions.get_or_create_for_chat("telegram", "1")
        msgs = _turn(1)
        await store.transcript.append(parent.id, msgs)
        new_active = [_summary(1), *msgs[-2:]]
        pristine = copy.deepcopy(new_active)
        with pytest.raises(RuntimeError):
            await store.transcript.rotate(parent.id, new_active)
        assert new_active == pristine
        assert (await store.sessions.get_session(parent.id)).end_reason is None
        assert [s.id for s in await store.sessions.list_sessions()] == [parent.id]
        assert (await store.sessions.get_or_create_for_chat("telegram", "1")).id == parent.id
    finally:
        await store.aclose()


async def test_compaction_and_concurrent_append_serialize(
    store: SqlSessionStore, open_store
) -> None:
    """An append racing a compaction lands wholly before it (archived) or wholly after (active)."""
    other = await open_store()
    try:
        for attempt in range(6):
            info = await store.sessions.create_session()
            msgs = [system_message("s"), *_turn(1)]
            await store.transcript.append(info.id, msgs)
            new_active = [msgs[0], _summary(attempt), *msgs[-2:]]
            late = [user_message(f"late {attempt} a"), user_message(f"late {attempt} b")]
            first, second = (store, other) if attempt % 2 else (other, store)
            await asyncio.wait_for(
                asyncio.gather(
                    first.transcript.archive_and_compact(info.id, new_active),
                    second.transcript.append(info.id, late),
                ),
                timeout=30,
            )
            active = [m["content"] for m in await store.transcript.load_active(info.id)]
            expected = [m["content"] for m in new_active]
            assert active in (expected, [*expected, *(m["content"] for m in late)])
            positions = [r[1] for r in await _rows(store, info.id)]
            assert len(positions) == len(set(positions))
    finally:
        await other.aclose()


async def test_stale_version_is_refused(store: SqlSessionStore) -> None:
    """With expected_version, a session changed since it was read is not compacted."""
    info = await store.sessions.create_session()
    msgs = _turn(1)
    await store.transcript.append(info.id, msgs)
    seen = (await store.sessions.get_session(info.id)).version
    await store.transcript.append(info.id, [user_message("meanwhile")])
    before = await _snapshot(store, info.id)
    with pytest.raises(ConcurrentModification):
        await store.transcript.archive_and_compact(info.id, [_summary(1)], expected_version=seen)
    assert await _snapshot(store, info.id) == before
    now = (await store.sessions.get_session(info.id)).version
    await store.transcript.archive_and_compact(info.id, [_summary(1)], expected_version=now)
    assert len(await store.transcript.load_active(info.id)) == 1
