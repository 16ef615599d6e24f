"""Memory in the store (`state.memory`), on SQLite and PostgreSQL, tested as two people.

Contract: every call names an owner and reads or changes only that owner's entries; search is
the store's full text (FTS5 / tsvector) filtered by owner in SQL; forgetting erases the text.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from agent.errors import StoreError
from state import SqlSessionStore

ALICE, BOB = "telegram:111", "http:bob"


async def test_remember_list_and_search_are_per_owner(store: SqlSessionStore) -> None:
    """What Alice's memory holds is found for Alice only; Bob's search, list and get see none
    of it even with her exact words and ids."""
    peanut = await store.memory.add_memory(
        ALICE, "Her daughter Mia is allergic to peanuts", kind="note", origin="tool"
    )
    await store.memory.add_memory(ALICE, "Answer in German", kind="profile", origin="ledger")
    await store.memory.add_memory(BOB, "Works on compilers", kind="note", origin="tool")
    hits = await store.memory.search_memory(ALICE, "peanuts allergy daughter")
    assert [h.entry.id for h in hits] == [peanut.id]
    assert await store.memory.search_memory(BOB, "peanuts") == []
    assert await store.memory.get_memory(BOB, peanut.id) is None
    assert await store.memory.forget_memory(BOB, peanut.id) is None
    assert [e.text for e in await store.memory.list_memory(BOB)] == ["Works on compilers"]
    assert [e.kind for e in await store.memory.list_memory(ALICE)] == ["note", "profile"]
    assert [e.text for e in await store.memory.list_memory(ALICE, kind="profile")] == [
        "Answer in German"
    ]
    assert (await store.memory.get_memory(ALICE, peanut.id)) == peanut


async def test_a_tagged_memory_is_found_by_its_tag_for_its_owner_only(
    store: SqlSessionStore,
) -> None:
    """Memory search quotes a term as `state.search` does: `HRM-1154` is a phrase, so an
    entry dense with `hrm` and `1154` apart is no hit, and Bob's entry with the tag is
    never Alice's."""
    ticket = await store.memory.add_memory(
        ALICE, "Ticket HRM-1154: keep the retry budget", kind="note", origin="tool"
    )
    await store.memory.add_memory(
        ALICE, "hrm, hrm, hrm: then 1154 ms, 1154 ms", kind="note", origin="tool"
    )
    bobs = await store.memory.add_memory(BOB, "HRM-1154 is Bob's", kind="note", origin="tool")
    assert [h.entry.id for h in await store.memory.search_memory(ALICE, "HRM-1154")] == [ticket.id]
    assert [h.entry.id for h in await store.memory.search_memory(BOB, "hrm-1154")] == [bobs.id]


async def test_forget_erases_text_and_leaves_search(store: SqlSessionStore) -> None:
    """A forgotten entry is gone from search and lists, and its text is erased in the table."""
    entry = await store.memory.add_memory(
        ALICE, "Lives at 12 Rua Augusta", kind="note", origin="tool"
    )
    forgotten = await store.memory.forget_memory(ALICE, entry.id)
    assert forgotten is not None and forgotten.text == "Lives at 12 Rua Augusta"
    assert await store.memory.search_memory(ALICE, "Augusta") == []
    assert await store.memory.list_memory(ALICE) == []
    history = await store.memory.list_memory(ALICE, include_history=True)
    assert [(e.deleted, e.text) for e in history] == [(True, "")]
    async with store._engine.connect() as conn:
        raw = (await conn.execute(text("SELECT text FROM memory"))).scalars().all()
    assert raw == [""]
    assert await store.memory.forget_memory(ALICE, entry.id) is None


async def test_correction_supersedes_and_is_owner_checked(store: SqlSessionStore) -> None:
    """An update is a new entry that retires the old one; Bob cannot correct Alice's entry."""
    old = await store.memory.add_memory(ALICE, "Lives in Porto", kind="note", origin="tool")
    with pytest.raises(StoreError, match="nothing remembered"):
        await store.memory.add_memory(
            BOB, "Lives in Faro", kind="note", origin="tool", supersedes=old.id
        )
    new = await store.memory.add_memory(
        ALICE, "Lives in Lisbon", kind="note", origin="tool", supersedes=old.id
    )
    assert [e.text for e in await store.memory.list_memory(ALICE)] == ["Lives in Lisbon"]
    assert [h.entry.id for h in await store.memory.search_memory(ALICE, "lives")] == [new.id]
    retired = await store.memory.get_memory(ALICE, old.id)
    assert retired is not None and retired.superseded_by == new.id
    assert await store.memory.list_memory(BOB) == []


async def test_same_text_is_kept_once(store: SqlSessionStore) -> None:
    """Remembering what is already remembered (spacing, ASCII case aside) returns the entry."""
    first = await store.memory.add_memory(
        ALICE, "Prefers  metric units", kind="note", origin="tool"
    )
    again = await store.memory.add_memory(
        ALICE, "prefers metric units", kind="note", origin="compaction"
    )
    assert again.id == first.id and first.text == "Prefers metric units"
    other = await store.memory.add_memory(BOB, "prefers metric units", kind="note", origin="tool")
    assert other.id != first.id


@pytest.mark.parametrize(
    "query", ['" OR 1=1 --', "NEAR(a b)", "*", "ünïcödé 🙂", "a" * 5000, "", "   "]
)
async def test_hostile_queries_find_nothing_and_never_fail(
    store: SqlSessionStore, query: str
) -> None:
    """Search syntax, odd Unicode, huge and empty queries are data: no error, no leak."""
    await store.memory.add_memory(
        BOB, "secret plans with unicode ünïcödé", kind="note", origin="tool"
    )
    assert await store.memory.search_memory(ALICE, query) == []


@pytest.mark.parametrize("bad", ["", "   ", "\x00", "x" * 4001])
async def test_bad_text_is_refused_clearly(store: SqlSessionStore, bad: str) -> None:
    """Empty or oversized text is refused with a sentence, storing nothing."""
    with pytest.raises(StoreError, match="memory"):
        await store.memory.add_memory(ALICE, bad, kind="note", origin="tool")
    assert await store.memory.list_memory(ALICE, include_history=True) == []


async def test_concurrent_writers_of_two_owners(store: SqlSessionStore) -> None:
    """Forty concurrent writes of two people land, each under its own owner."""
    await asyncio.gather(
        *(
            store.memory.add_memory(owner, f"fact {owner} {i}", kind="note", origin="tool")
            for i in range(20)
            for owner in (ALICE, BOB)
        )
    )
    for owner in (ALICE, BOB):
        mine = await store.memory.list_memory(owner)
        assert len(mine) == 20 and all(e.owner == owner and owner in e.text for e in mine)


def _vec(*hot: int, size: int = 8) -> list[float]:
    return [1.0 if i in hot else 0.0 for i in range(size)]


async def test_hybrid_search_finds_by_vector_what_words_miss(store: SqlSessionStore) -> None:
    """With the query's vector, an entry sharing no word with the query is found by its
    vector; entries of another owner or another model's vectors never are; forgetting drops
    the vector too."""
    near = await store.memory.add_memory(
        ALICE, "Mia cannot eat peanuts", kind="note", origin="tool"
    )
    words = await store.memory.add_memory(
        ALICE, "allergy clinic on Fridays", kind="note", origin="tool"
    )
    bobs = await store.memory.add_memory(BOB, "Bob hates peanut butter", kind="note", origin="tool")
    assert await store.memory.set_memory_vector(ALICE, near.id, model="m1", vector=_vec(0, 1))
    assert await store.memory.set_memory_vector(ALICE, words.id, model="m1", vector=_vec(5))
    assert await store.memory.set_memory_vector(BOB, bobs.id, model="m1", vector=_vec(0, 1))
    assert not await store.memory.set_memory_vector(BOB, near.id, model="m1", vector=_vec(0))
    hits = await store.memory.search_memory(ALICE, "peanut allergy", vector=_vec(0, 1), model="m1")
    assert {h.entry.id for h in hits} == {near.id, words.id}
    assert hits[0].entry.id in (near.id, words.id)
    assert await store.memory.search_memory(ALICE, "zzz", vector=_vec(0, 1), model="m2") == []
    only_vector = await store.memory.search_memory(ALICE, "", vector=_vec(0, 1), model="m1")
    assert [h.entry.id for h in only_vector] == [near.id]
    await store.memory.forget_memory(ALICE, near.id)
    assert await store.memory.search_memory(ALICE, "", vector=_vec(0, 1), model="m1") == []


@pytest.mark.parametrize("vector", [[], [0.0, 0.0], [float("nan"), 1.0], [1.0] * 9000])
async def test_bad_vectors_are_not_kept(store: SqlSessionStore, vector: list[float]) -> None:
    """Empty, zero, non-finite or absurdly long vectors are refused without an error."""
    entry = await store.memory.add_memory(ALICE, "fact", kind="note", origin="tool")
    assert not await store.memory.set_memory_vector(ALICE, entry.id, model="m", vector=vector)
    assert await store.memory.search_memory(ALICE, "", vector=vector, model="m") == []
