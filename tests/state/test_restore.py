"""`restore_active`: undoing a compaction makes the same rows active again, in one transaction,
on both engines; a failure at any step leaves the session exactly as before; rows of another
session are refused."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from agent.errors import ConcurrentModification, StoreError
from agent.messages import assistant_message, system_message, user_message
from state import SqlSessionStore
from tests.state.fixtures import StoreTarget


def _summary(text_: str) -> dict[str, Any]:
    return {"role": "user", "content": text_, "_kind": "summary"}


async def _rows(store: SqlSessionStore, session_id: str) -> list[tuple[Any, ...]]:
    async with store._engine.connect() as conn:
        result = await conn.execute(
            text(
                "SELECT id, position, active, compacted, content FROM messages "
                "WHERE session_id = :s ORDER BY id"
            ),
            {"s": session_id},
        )
        return [tuple(r) for r in result.all()]


async def _compacted(store: SqlSessionStore) -> tuple[str, list[int]]:
    """A session of six messages compacted to system + summary + the newest exchange; returns
    its id and the active row ids before the compaction."""
    info = await store.sessions.create_session()
    said = [system_message("s")]
    for n in range(3):
        said += [user_message(f"question {n}"), assistant_message(f"answer {n}")]
    await store.transcript.append(info.id, said)
    before = [m["_id"] for m in said]
    await store.transcript.archive_and_compact(
        info.id, [said[0], _summary("summary of 0 and 1"), *said[-2:]], kind="batch"
    )
    return info.id, before


async def test_restore_makes_the_same_rows_active_in_their_order(store: SqlSessionStore) -> None:
    """The rows before the compaction are active again, in order, same ids, no copies; the
    summary is archived; counters follow; nothing is deleted."""
    session_id, before = await _compacted(store)
    rows_compacted = await _rows(store, session_id)
    version = (await store.sessions.get_session(session_id)).version  # type: ignore[union-attr]
    archived = await store.transcript.restore_active(session_id, before, expected_version=version)
    loaded = await store.transcript.load_active(session_id)
    assert [m["_id"] for m in loaded] == before
    assert [m["content"] for m in loaded][1:3] == ["question 0", "answer 0"]
    assert archived == 1  # the summary
    rows = await _rows(store, session_id)
    assert len(rows) == len(rows_compacted)  # nothing inserted, nothing deleted
    summary = [r for r in rows if r[4] == "summary of 0 and 1"]
    assert summary and summary[0][2] in (False, 0)
    assert all(r[3] in (False, 0) for r in rows if r[0] in before)
    info = await store.sessions.get_session(session_id)
    assert info is not None and info.active_messages == len(before)
    assert info.version == version + 1


async def test_restore_refuses_rows_of_another_session(store: SqlSessionStore) -> None:
    """Bob's session cannot pull Alice's rows into his context: refused, nothing changes."""
    alice, alice_rows = await _compacted(store)
    bob = await store.sessions.get_or_create_for_chat("telegram", "bob", user_id="2")
    await store.transcript.append(bob.id, [system_message("s"), user_message("bob's words")])
    bob_active = [m["_id"] for m in await store.transcript.load_active(bob.id)]
    before_alice, before_bob = await _rows(store, alice), await _rows(store, bob.id)
    with pytest.raises(StoreError, match="rows not in session"):
        await store.transcript.restore_active(
            bob.id, [*bob_active, alice_rows[1]], expected_version=None
        )
    assert await _rows(store, alice) == before_alice
    assert await _rows(store, bob.id) == before_bob


async def test_restore_refuses_a_moved_session(store: SqlSessionStore) -> None:
    session_id, before = await _compacted(store)
    version = (await store.sessions.get_session(session_id)).version  # type: ignore[union-attr]
    await store.transcript.append(session_id, [user_message("meanwhile")])
    rows = await _rows(store, session_id)
    with pytest.raises(ConcurrentModification):
        await store.transcript.restore_active(session_id, before, expected_version=version)
    assert await _rows(store, session_id) == rows


async def test_restore_refuses_empty_or_repeated_ids(store: SqlSessionStore) -> None:
    session_id, before = await _compacted(store)
    for bad in ([], [before[0], before[0]]):
        with pytest.raises(StoreError):
            await store.transcript.restore_active(session_id, bad, expected_version=None)


@pytest.mark.parametrize("step", ["archived", "renumbered"])
async def test_failure_mid_way_leaves_the_session_as_before(
    store_target: StoreTarget, step: str
) -> None:
    """An exception between the statements rolls the whole restore back."""

    def hook(at: str) -> None:
        if at == f"restore_active:{step}":
            raise RuntimeError(f"injected at {at}")

    store = await store_target.open(fault_hook=hook)
    try:
        session_id, before = await _compacted(store)
        rows, info = await _rows(store, session_id), await store.sessions.get_session(session_id)
        with pytest.raises(RuntimeError, match="injected"):
            await store.transcript.restore_active(session_id, before, expected_version=None)
        assert await _rows(store, session_id) == rows
        assert await store.sessions.get_session(session_id) == info
    finally:
        await store.aclose()
