"""Archive reads by row id and the standing-instructions ledger, on both engines."""

from __future__ import annotations

import pytest

from agent.errors import StoreError
from agent.messages import assistant_message, tool_message, user_message
from state import SqlSessionStore


async def _archived_session(store: SqlSessionStore) -> tuple[str, list[int]]:
    """A session whose first turn was compacted away: rows 0-3 archived, marker + tail active."""
    info = await store.sessions.create_session()
    first = [
        user_message("first question"),
        assistant_message("reading", [_call("c1")]),
        tool_message("c1", "read_file", "file body"),
        assistant_message("first answer"),
    ]
    await store.transcript.append(info.id, first)
    marker = {"role": "user", "content": "summary of the first turn", "_kind": "summary"}
    await store.transcript.archive_and_compact(info.id, [marker, user_message("second question")])
    return info.id, [m["_id"] for m in first]


def _call(call_id: str) -> dict:  # type: ignore[type-arg]
    return {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


async def test_read_rows_by_range_returns_archived_rows_verbatim(store: SqlSessionStore) -> None:
    """An id range gives the session's rows in order, archived ones flagged, tool calls kept."""
    session_id, ids = await _archived_session(store)
    rows = await store.search.read_rows(session_id, first_id=ids[0], last_id=ids[-1])
    assert [r.id for r in rows] == ids
    assert [r.role for r in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[2].text == "file body" and rows[2].name == "read_file"
    assert rows[1].tool_calls[0]["id"] == "c1"
    assert not any(r.active for r in rows)


async def test_read_rows_pages_and_skips_superseded_summaries(store: SqlSessionStore) -> None:
    """limit/offset page through the range; an archived marker is shown only when asked for."""
    session_id, ids = await _archived_session(store)
    active = await store.transcript.load_active(session_id)
    await store.transcript.archive_and_compact(
        session_id, [user_message("third")]
    )  # archives the marker
    page = await store.search.read_rows(session_id, first_id=ids[0], limit=2, offset=2)
    assert [r.id for r in page] == ids[2:4]
    everything = await store.search.read_rows(session_id, first_id=ids[0], limit=100)
    assert active[0]["_id"] not in [r.id for r in everything]
    with_markers = await store.search.read_rows(session_id, first_id=ids[0], include_summaries=True)
    assert active[0]["_id"] in [r.id for r in with_markers]


async def test_read_rows_never_crosses_sessions(store: SqlSessionStore) -> None:
    """Ids of another session are not returned, even when asked for by id."""
    session_id, ids = await _archived_session(store)
    other = await store.sessions.create_session()
    stranger = [user_message("not yours")]
    await store.transcript.append(other.id, stranger)
    rows = await store.search.read_rows(session_id, ids=[*ids[:2], stranger[0]["_id"]])
    assert [r.id for r in rows] == ids[:2]
    assert await store.search.read_rows(session_id, ids=[]) == []
    assert await store.search.read_rows(session_id, first_id=10**12) == []


async def test_ledger_supersession_retires_the_old_entry(store: SqlSessionStore) -> None:
    """A superseding entry retires the one it replaces in the same write; both stay on record."""
    info = await store.sessions.create_session()
    msgs = [user_message("always use tabs")]
    await store.transcript.append(info.id, msgs)
    old = await store.ledger.add_instruction(
        info.id, "always use tabs", kind="detected", source_message_id=msgs[0]["_id"]
    )
    new = await store.ledger.add_instruction(
        info.id, "never use tabs", kind="detected", supersedes_id=old.id
    )
    assert new.supersedes_id == old.id and new.status == "active"
    assert [i.text for i in await store.ledger.list_instructions(info.id)] == ["never use tabs"]
    everything = await store.ledger.list_instructions(info.id, include_inactive=True)
    assert [(i.text, i.status) for i in everything] == [
        ("always use tabs", "superseded"),
        ("never use tabs", "active"),
    ]
    assert everything[0].source_message_id == msgs[0]["_id"]


async def test_ledger_remove_and_refusals(store: SqlSessionStore) -> None:
    """Removing retires an entry once; bad kinds, empty text and unknown sessions are refused."""
    info = await store.sessions.create_session()
    pin = await store.ledger.add_instruction(
        info.id, "  answer in British English \x00", kind="pin"
    )
    assert pin.text == "answer in British English" and pin.source_message_id is None
    assert await store.ledger.remove_instruction(info.id, pin.id) is True
    assert await store.ledger.remove_instruction(info.id, pin.id) is False
    assert await store.ledger.list_instructions(info.id) == []
    with pytest.raises(StoreError, match="kind"):
        await store.ledger.add_instruction(info.id, "x", kind="rule")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="text"):
        await store.ledger.add_instruction(info.id, " \n ", kind="pin")
    with pytest.raises(StoreError, match="no session"):
        await store.ledger.add_instruction("missing", "x", kind="pin")
    other = await store.sessions.create_session()
    kept = await store.ledger.add_instruction(info.id, "keep me", kind="pin")
    assert await store.ledger.remove_instruction(other.id, kept.id) is False


async def test_a_superseded_id_of_another_session_is_not_linked(store: SqlSessionStore) -> None:
    """An entry cannot retire another session's entry; the link is left empty instead."""
    a, b = await store.sessions.create_session(), await store.sessions.create_session()
    theirs = await store.ledger.add_instruction(a.id, "never guess", kind="pin")
    mine = await store.ledger.add_instruction(
        b.id, "always guess", kind="pin", supersedes_id=theirs.id
    )
    assert mine.supersedes_id is None
    assert [i.status for i in await store.ledger.list_instructions(a.id)] == ["active"]


async def test_rotation_carries_the_ledger(store: SqlSessionStore) -> None:
    """Legacy rotating compaction copies the active ledger into the child session."""
    info = await store.sessions.create_session()
    await store.ledger.add_instruction(info.id, "never push to main", kind="pin")
    child = await store.transcript.rotate(info.id, [user_message("carry on")])
    assert [i.text for i in await store.ledger.list_instructions(child.id)] == [
        "never push to main"
    ]
