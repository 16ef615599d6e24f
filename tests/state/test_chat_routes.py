"""Chat routes and titles on SQLite and PostgreSQL: /new leaving a named session, /resume."""

from __future__ import annotations

import pytest

from agent.errors import StoreError
from state import SqlSessionStore
from state.records import MAX_TITLE_CHARS


async def test_resume_routes_the_chat_back_and_reopens_the_session(store: SqlSessionStore) -> None:
    """/resume points the chat at a session it left with /new, re-opens it, and ends the one
    it leaves; the store then routes the chat there."""
    first = await store.sessions.get_or_create_for_chat("telegram", "c")
    second = await store.sessions.start_new_for_chat("telegram", "c")
    resumed = await store.sessions.resume_for_chat("telegram", "c", first.id)
    assert resumed.id == first.id and resumed.end_reason is None
    assert resumed.version > first.version
    assert (await store.sessions.get_session(second.id)).end_reason == "new"  # type: ignore[union-attr]
    assert (await store.sessions.get_or_create_for_chat("telegram", "c")).id == first.id


async def test_new_and_resume_leave_the_named_session_not_the_routed_one(
    store: SqlSessionStore,
) -> None:
    """A front end that names its session (the terminal) ends that one on /new, so another
    window routed elsewhere keeps its session open."""
    routed = await store.sessions.get_or_create_for_chat("terminal", "terminal:dm:me")
    mine = await store.sessions.create_session(platform="terminal", chat_key="terminal:dm:me")
    fresh = await store.sessions.start_new_for_chat("terminal", "terminal:dm:me", leaving=mine.id)
    assert (await store.sessions.get_session(mine.id)).end_reason == "new"  # type: ignore[union-attr]
    assert (await store.sessions.get_session(routed.id)).end_reason is None  # type: ignore[union-attr]
    await store.sessions.resume_for_chat("terminal", "terminal:dm:me", mine.id, leaving=fresh.id)
    assert (await store.sessions.get_session(routed.id)).end_reason is None  # type: ignore[union-attr]
    assert (await store.sessions.get_session(mine.id)).end_reason is None  # type: ignore[union-attr]


async def test_resume_of_a_missing_session_changes_nothing(store: SqlSessionStore) -> None:
    """An unknown id is a StoreError and the chat keeps its route."""
    current = await store.sessions.get_or_create_for_chat("discord", "c")
    with pytest.raises(StoreError, match="no session"):
        await store.sessions.resume_for_chat("discord", "c", "nope")
    assert (await store.sessions.get_or_create_for_chat("discord", "c")).id == current.id
    assert (await store.sessions.get_session(current.id)).end_reason is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("  Trip\nto   Oslo ", "Trip to Oslo"),
        ("x" * (MAX_TITLE_CHARS + 50), "x" * (MAX_TITLE_CHARS - 1) + "…"),
        ("🚀 ünïcødé", "🚀 ünïcødé"),
        ("   ", None),
    ],
)
async def test_set_title_keeps_one_clean_line(
    store: SqlSessionStore, given: str, stored: str | None
) -> None:
    """A title is one line of collapsed whitespace, cut to the column with an ellipsis; blank
    clears it."""
    info = await store.sessions.create_session(platform="terminal")
    renamed = await store.sessions.set_title(info.id, given)
    assert renamed.title == stored
    assert (await store.sessions.get_session(info.id)).title == stored  # type: ignore[union-attr]


async def test_set_title_of_a_missing_session_is_a_store_error(store: SqlSessionStore) -> None:
    """Naming a session that does not exist says so."""
    with pytest.raises(StoreError, match="no session"):
        await store.sessions.set_title("nope", "x")
