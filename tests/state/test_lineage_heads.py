"""Stateless conversations' heads: found by one indexed lookup, taken atomically, carried by a
rotation, never found on an ended session."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from state.store import SqlSessionStore


async def test_take_finds_the_session_and_claims_it_once(store: SqlSessionStore) -> None:
    """Two requests extending one head at once: exactly one gets the session."""
    info = await store.sessions.create_session(platform="http")
    await store.sessions.set_lineage(info.id, "h1")
    taken = await asyncio.gather(
        store.sessions.take_lineage("h1", "claim-a"), store.sessions.take_lineage("h1", "claim-b")
    )
    assert sorted(t or "" for t in taken) == ["", info.id]
    assert await store.sessions.take_lineage("h1", "claim-c") is None
    await store.sessions.set_lineage(info.id, "h2")
    assert await store.sessions.take_lineage("h2", "claim-d") == info.id
    await store.sessions.set_lineage(info.id, None)
    assert await store.sessions.take_lineage("claim-d", "x") is None


async def test_heads_do_not_move_the_version_and_ended_sessions_are_not_found(
    store: SqlSessionStore,
) -> None:
    info = await store.sessions.create_session(platform="http")
    await store.sessions.set_lineage(info.id, "h")
    after = await store.sessions.get_session(info.id)
    assert after is not None and after.version == info.version
    child = await store.transcript.rotate(info.id, [{"role": "system", "content": "s"}])
    assert (
        await store.sessions.take_lineage("h", "c") == child.id
    )  # the parent ended; the child carries it


async def test_the_lookup_uses_the_index(store: SqlSessionStore) -> None:
    """The head lookup is one indexed query (SQLite's plan names the index)."""
    async with store._engine.connect() as conn:
        if conn.dialect.name != "sqlite":
            return
        plan = await conn.execute(
            text("EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE lineage_head = 'x'")
        )
        assert "ix_sessions_lineage_head" in " ".join(str(r) for r in plan)
