"""Session owners (issue 24): the spelling, the v7 backfill, and reads that never cross owners.

The rule under test (docs/privacy.md): a reader bound to one owner's `ReadScope` gets rows, hits
and sessions of that owner only, and the filter is in the query, so a hit of another owner can
neither be returned nor push one of the reader's own out of the result.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from state import SqlSessionStore
from state.migrations import SCHEMA_VERSION
from state.owners import DEFAULT_HTTP_OWNER, LOCAL_OWNER, chat_owner, legacy_owner, person_owner
from state.values import ReadScope
from tests.state.fixtures import StoreTarget

# -- the spelling ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "chat_key", "user_id", "owner"),
    [
        ("telegram", "telegram:dm:111", "111", "telegram:111"),
        ("discord", "discord:dm:42", "42", "discord:42"),
        ("telegram", "telegram:chat:-100:user:111", "111", "telegram:chat:-100"),
        ("telegram", "telegram:chat:-100", "111", "telegram:chat:-100"),
        ("discord", "discord:chat:9:thread:7", "42", "discord:chat:9"),
        ("telegram", "dm:111", "111", "telegram:111"),  # a key without the platform prefix
        ("telegram", "odd", "111", "telegram:111"),  # unknown shape: the user it names
        ("telegram", None, None, LOCAL_OWNER),
        ("http", "stateless", "bob", DEFAULT_HTTP_OWNER),  # which key was not recorded
        ("http", "http:dm:bob", "bob", DEFAULT_HTTP_OWNER),
        ("terminal", "terminal:dm:root", "root", LOCAL_OWNER),
        ("cli", None, None, LOCAL_OWNER),
        ("bench", None, None, LOCAL_OWNER),
    ],
)
def test_legacy_owner_follows_the_route(
    platform: str, chat_key: str | None, user_id: str | None, owner: str
) -> None:
    """A pre-v7 session gets the owner its route implies: a direct chat its user, a group its
    chat, HTTP the admin key, the terminal and anything else the machine's owner."""
    assert legacy_owner(platform, chat_key, user_id) == owner


def test_owner_spellings() -> None:
    """People are `platform:id`; a group chat is `platform:chat:id`, never a person's key."""
    assert person_owner("telegram", "111") == "telegram:111"
    assert chat_owner("telegram", "-100") == "telegram:chat:-100"
    assert chat_owner("telegram", "111") != person_owner("telegram", "111")


def test_read_scope() -> None:
    """A scope reads its owner only; widened, everyone (and then filters nothing)."""
    mine = ReadScope(owner="http:alice")
    assert mine.may_read("http:alice") and not mine.may_read("http:bob")
    assert not mine.may_read(None) and mine.owner_filter == "http:alice"
    widened = ReadScope(owner="http:ops", everyone=True)
    assert widened.may_read("http:bob") and widened.owner_filter is None


# -- the v7 migration -----------------------------------------------------------------------------


async def test_a_v6_database_gets_owners_backfilled(fresh_store_target: StoreTarget) -> None:
    """A version-6 database (no owner column, no index) is upgraded on open: every session gets
    the owner its route implies, the index exists, and owner-scoped reads work at once."""
    store = await fresh_store_target.open()
    try:
        dm = await store.sessions.get_or_create_for_chat(
            "telegram", "telegram:dm:111", user_id="111"
        )
        group = await store.sessions.get_or_create_for_chat(
            "telegram", "telegram:chat:-100:user:112", user_id="112"
        )
        api = await store.sessions.create_session(
            platform="http", chat_key="stateless", user_id="bob"
        )
        local = await store.sessions.create_session(
            platform="terminal", chat_key="terminal:dm:root"
        )
        await store.transcript.append(dm.id, [{"role": "user", "content": "my pin is zorvex"}])
        await store.transcript.append(
            group.id, [{"role": "user", "content": "zorvex in the group"}]
        )
        async with store._engine.begin() as conn:
            await conn.execute(text("DROP INDEX ix_sessions_owner_updated"))
            await conn.execute(text("ALTER TABLE sessions DROP COLUMN owner"))
            await conn.execute(text("UPDATE schema_version SET version = 6"))
    finally:
        await store.aclose()
    store = await fresh_store_target.open()
    try:
        owners = {s.id: s.owner for s in await store.sessions.list_sessions(limit=10)}
        assert owners == {
            dm.id: "telegram:111",
            group.id: "telegram:chat:-100",
            api.id: DEFAULT_HTTP_OWNER,
            local.id: LOCAL_OWNER,
        }
        async with store._engine.connect() as conn:
            version = (await conn.execute(text("SELECT version FROM schema_version"))).scalar()
        assert version == SCHEMA_VERSION
        hits = await store.view(ReadScope(owner="telegram:111")).search("zorvex")
        assert [h.session_id for h in hits] == [dm.id]
    finally:
        await store.aclose()
    async with await fresh_store_target.open() as again:  # idempotent: a second open is a no-op
        assert {s.id: s.owner for s in await again.sessions.list_sessions(limit=10)} == owners


# -- reads never cross owners ---------------------------------------------------------------------

_OWNERS = (
    "telegram:111",
    "telegram:1111",  # a prefix of another
    "telegram:chat:-100",
    "http:alice",
    "http:alice ",  # trailing space
    "HTTP:alice",  # another case
    "http:ålice",
    LOCAL_OWNER,
)
_WORDS = ("zorvex", "kestrel", "pin", "bank", "alpha", "omega")


@st.composite
def _worlds(draw: Any) -> tuple[list[tuple[int, list[str]]], list[tuple[int, str]]]:
    """Sessions (owner index, messages of vocabulary words) and searches (reader, word)."""
    sessions = draw(
        st.lists(
            st.tuples(
                st.integers(0, len(_OWNERS) - 1),
                st.lists(
                    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join),
                    min_size=1,
                    max_size=4,
                ),
            ),
            min_size=1,
            max_size=6,
        )
    )
    searches = draw(
        st.lists(
            st.tuples(st.integers(0, len(_OWNERS) - 1), st.sampled_from(_WORDS)),
            min_size=1,
            max_size=6,
        )
    )
    return sessions, searches


async def _check_world(
    target: StoreTarget,
    sessions: list[tuple[int, list[str]]],
    searches: list[tuple[int, str]],
) -> None:
    store = await target.open()
    try:
        made: list[tuple[str, str, list[tuple[int, str]]]] = []  # (session, owner, [(id, text)])
        for owner_index, texts in sessions:
            owner = _OWNERS[owner_index]
            info = await store.sessions.create_session(platform="http", owner=owner)
            messages: list[Any] = [{"role": "user", "content": t} for t in texts]
            await store.transcript.append(info.id, messages)
            made.append(
                (info.id, owner, [(m["_id"], t) for m, t in zip(messages, texts, strict=True)])
            )
        owner_of = {s.id: s.owner for s in await store.sessions.list_sessions(limit=10_000)}
        for reader_index, word in searches:
            reader = _OWNERS[reader_index]
            view = store.view(ReadScope(owner=reader))
            hits = await view.search(word, limit=200)
            assert all(owner_of[h.session_id] == reader for h in hits), (reader, word)
            found = {h.message_id for h in hits}
            mine = {i for sid, o, rows in made if o == reader for i, t in rows if word in t.split()}
            assert mine <= found, "the owner filter hid one of the reader's own hits"
            for session_id, owner, _rows in made:
                read = await view.read_rows(session_id, limit=100)
                assert bool(read) == (owner == reader)
                assert (await view.get_session(session_id) is not None) == (owner == reader)
            assert all(s.owner == reader for s in await view.list_sessions(limit=10_000))
    finally:
        await store.aclose()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=_worlds())
def test_no_read_ever_returns_another_owners_session(
    store_target: StoreTarget, world: tuple[list[tuple[int, list[str]]], list[tuple[int, str]]]
) -> None:
    """For random owners (near-miss spellings included), random sessions and random searches,
    on SQLite and PostgreSQL: every hit, row and session a scoped view returns is the reader's,
    and none of the reader's own matches is missing. Sessions pile up across examples in one
    database, so every search also runs against earlier examples' owners."""
    sessions, searches = world
    asyncio.run(_check_world(store_target, sessions, searches))


async def test_widened_scope_reads_everyone(store: SqlSessionStore) -> None:
    """An admin scope widened by config reads every owner's sessions; unwidened, only its own."""
    alice = await store.sessions.create_session(platform="http", owner="http:alice")
    bob = await store.sessions.create_session(platform="http", owner="http:bob")
    for info in (alice, bob):
        await store.transcript.append(
            info.id, [{"role": "user", "content": f"zorvex of {info.id}"}]
        )
    widened = store.view(ReadScope(owner="http:ops", everyone=True))
    assert {h.session_id for h in await widened.search("zorvex")} == {alice.id, bob.id}
    assert await store.view(ReadScope(owner="http:ops")).search("zorvex") == []


async def test_lineage_heads_are_taken_by_their_owner_only(store: SqlSessionStore) -> None:
    """A stateless head replayed under another key finds nothing (and stays for its owner)."""
    alice = await store.sessions.create_session(platform="http", owner="http:alice")
    head = uuid.uuid4().hex
    await store.sessions.set_lineage(alice.id, head)
    assert await store.sessions.take_lineage(head, "claim-b", owner="http:bob") is None
    assert await store.sessions.take_lineage(head, "claim-a", owner="http:alice") == alice.id


async def test_resume_and_title_refuse_another_owner_as_unknown(store: SqlSessionStore) -> None:
    """`resume_for_chat` and `set_title` with an owner answer another owner's session exactly
    as a missing one, and change nothing."""
    from state.store_errors import StoreError

    theirs = await store.sessions.get_or_create_for_chat(
        "telegram", "telegram:dm:111", owner="telegram:111"
    )
    mine = await store.sessions.get_or_create_for_chat(
        "telegram", "telegram:dm:112", owner="telegram:112"
    )
    for target in (theirs.id, "20990101_000000_deadbeef"):
        with pytest.raises(StoreError, match="no session"):
            await store.sessions.resume_for_chat(
                "telegram", "telegram:dm:112", target, leaving=mine.id, owner="telegram:112"
            )
        with pytest.raises(StoreError, match="no session"):
            await store.sessions.set_title(target, "mine now", owner="telegram:112")
    after = await store.sessions.get_session(theirs.id)
    assert after is not None and after.title is None and after.end_reason is None
    still = await store.sessions.get_or_create_for_chat(
        "telegram", "telegram:dm:112", owner="telegram:112"
    )
    assert still.id == mine.id
