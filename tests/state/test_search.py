"""Search over every message on both engines: archived rows, filters, ranking, hostile queries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.messages import assistant_message, user_message
from state import SqlSessionStore
from state.search import _owner_first


async def _seed(store: SqlSessionStore) -> dict[str, str]:
    tg = await store.sessions.create_session(platform="telegram")
    cli = await store.sessions.create_session(platform="cli")
    old = [user_message("the zephyr quartz deployment failed"), assistant_message("rolled back")]
    old[0]["_created_at"] = 1_000.0
    old[1]["_created_at"] = 1_001.0
    await store.transcript.append(tg.id, old)
    await store.transcript.archive_and_compact(
        tg.id, [{"role": "user", "content": "summary of work", "_kind": "summary"}]
    )
    recent = [
        user_message("zephyr again, and zephyr once more: zephyr"),
        assistant_message("the quartz crystal is fine"),
    ]
    for m in recent:
        m["_created_at"] = 5_000.0
    await store.transcript.append(cli.id, recent)
    return {"tg": tg.id, "cli": cli.id}


async def test_search_finds_archived_rows_with_snippets(store: SqlSessionStore) -> None:
    """An archived message is found, marked inactive, with the match highlighted."""
    ids = await _seed(store)
    hits = await store.search.search("deployment")
    assert len(hits) == 1
    hit = hits[0]
    assert (hit.session_id, hit.active, hit.role, hit.platform) == (
        ids["tg"],
        False,
        "user",
        "telegram",
    )
    assert "[deployment]" in hit.snippet
    assert hit.created_at == 1_000.0


async def test_search_ranks_denser_matches_first(store: SqlSessionStore) -> None:
    """The message that says the term most often ranks first."""
    ids = await _seed(store)
    hits = await store.search.search("zephyr")
    assert [h.session_id for h in hits] == [ids["cli"], ids["tg"]]
    assert hits[0].rank > hits[1].rank


async def test_search_requires_all_terms_then_falls_back_to_any(store: SqlSessionStore) -> None:
    """Two terms match the message holding both; unmatched extra words still find the best."""
    await _seed(store)
    both = await store.search.search("zephyr quartz")
    assert [h.snippet.count("[") for h in both][:1] and len(both) == 1
    assert "deployment" in both[0].snippet
    fallback = await store.search.search("quartz nonexistentword")
    assert len(fallback) == 2


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"platform": "cli"}, ["cli"]),
        ({"platform": "telegram"}, ["tg"]),
        ({"role": "assistant"}, ["cli"]),
        ({"since": 2_000.0}, ["cli"]),
        ({"until": 2_000.0}, ["tg"]),
        ({"since": 900.0, "until": 6_000.0}, ["cli", "tg"]),
        ({"platform": "discord"}, []),
    ],
)
async def test_search_filters(store: SqlSessionStore, filters: dict, expected: list[str]) -> None:
    """Platform, role and date range filters narrow the hits."""
    ids = await _seed(store)
    hits = await store.search.search("quartz", **filters)
    assert sorted(h.session_id for h in hits) == sorted(ids[k] for k in expected)


async def test_search_session_filter_and_limit(store: SqlSessionStore) -> None:
    """A session filter keeps that session's hits; the limit caps the count."""
    ids = await _seed(store)
    assert {h.session_id for h in await store.search.search("zephyr", session_id=ids["tg"])} == {
        ids["tg"]
    }
    assert len(await store.search.search("zephyr", limit=1)) == 1
    assert await store.search.search("zephyr", limit=0) == []


HOSTILE = [
    '"',
    "*",
    "NEAR(",
    "'; DROP TABLE messages; --",
    "x" * 10_240,
    "🦊🔥",
    "",
    "   ",
    'zephyr" OR "',
    "zephyr*",
    "NOT zephyr",
    "col:zephyr",
    "\x00zephyr",
    "(zephyr",
    "-zephyr",
    "a & b | !c",
    "zephyr:*",
    " ".join(["zephyr"] * 2_000),
    "NEAR(zephyr quartz, 2)",
    "^zephyr",
    'zephyr\\" OR "',
    "zephyr\\",
    "\ud800zephyr",
    "zephyr-\x00-",
    '"zephyr quartz"*',
    "{content}:zephyr",
    "content:zephyr",
]


async def test_hostile_queries_never_raise(store: SqlSessionStore) -> None:
    """Any user text returns hits or [], never an SQL or FTS syntax error; words still match."""
    await _seed(store)
    for query in HOSTILE:
        hits = await store.search.search(query)
        assert isinstance(hits, list), query[:40]
        if "zephyr" in query:
            assert hits, f"the word in {query[:40]!r} should still match"
    assert (await store.sessions.stats())["messages"] == 5


async def test_a_ticket_tag_is_a_phrase_and_finds_only_the_owners_ticket(
    store: SqlSessionStore,
) -> None:
    """`HRM-1154` is searched as the phrase of its words (FTS5: a quoted string is tokenized
    into a phrase, https://www.sqlite.org/fts5.html section 3; PostgreSQL: a quoted
    `websearch_to_tsquery` phrase is `<->`, parsed as the messages were): a CI paste dense with
    `hrm` and `[1154 ms]`, which outranked the ticket while the words were searched apart, is
    no hit, and neither is another person's message with the same tag."""
    alice = await store.sessions.create_session(platform="http", owner="http:alice")
    bob = await store.sessions.create_session(platform="http", owner="http:bob")
    ticket = user_message("Change `retry_budget` in agent/loop.py; Ticket HRM-1154.")
    decoy = user_message("hrm, hrm, hrm: then [1154 ms] [1154 ms] [1154 ms] [1154 ms]")
    await store.transcript.append(alice.id, [ticket, decoy])
    theirs = user_message("HRM-1154 HRM-1154, Bob's own ticket")
    await store.transcript.append(bob.id, [theirs])
    hits = await store.search.search("HRM-1154", owner="http:alice")
    assert [h.message_id for h in hits] == [ticket["_id"]]
    assert "1154]" in hits[0].snippet  # highlighted on both engines
    in_session = await store.search.search("(HRM-1154)", session_id=alice.id, role="user")
    assert decoy["_id"] not in [h.message_id for h in in_session] and in_session
    bobs = await store.search.search("HRM-1154", owner="http:bob")
    assert [h.message_id for h in bobs] == [theirs["_id"]]
    everyone = await store.search.search("HRM-1154")
    assert {h.message_id for h in everyone} == {ticket["_id"], theirs["_id"]}


async def test_superseded_summaries_can_be_left_out(store: SqlSessionStore) -> None:
    """Archived summary markers are found by default, and left out when asked (the agent's tool)."""
    session = await store.sessions.create_session(platform="cli")
    await store.transcript.append(session.id, [user_message("plan the orbital launch")])
    first = {"role": "assistant", "content": "summary: orbital launch planned", "_kind": "summary"}
    await store.transcript.archive_and_compact(session.id, [first])
    newer = {"role": "assistant", "content": "summary: orbital launch done", "_kind": "summary"}
    await store.transcript.archive_and_compact(session.id, [newer])
    everything = await store.search.search("orbital")
    assert len(everything) == 3
    fresh = await store.search.search("orbital", superseded_summaries=False)
    assert sorted(h.active for h in fresh) == [False, True]  # the user's words and the live summary
    assert all("planned" not in h.snippet for h in fresh)


@pytest.mark.parametrize("scoped", [False, True])
async def test_a_common_word_ranks_only_the_newest_matches(
    store: SqlSessionStore, monkeypatch: pytest.MonkeyPatch, scoped: bool
) -> None:
    """Ranking looks at the newest SEARCH_WINDOW matches: an older, denser match is not scored
    (the documented trade-off), while a rarer word still reaches back to it."""
    monkeypatch.setattr("state.search.SEARCH_WINDOW", 4)
    session = await store.sessions.create_session(platform="cli")
    other = await store.sessions.create_session(platform="cli")
    await store.transcript.append(
        session.id, [user_message("comet comet comet comet, the oldest and best")]
    )
    oldest = (await store.transcript.load_active(session.id))[0]["_id"]
    for n in range(6):
        await store.transcript.append(session.id, [user_message(f"a comet sighting number {n}")])
        await store.transcript.append(other.id, [user_message(f"another comet elsewhere {n}")])
    session_id = session.id if scoped else None
    hits = await store.search.search("comet", session_id=session_id, limit=10)
    assert len(hits) == 4
    assert oldest not in [h.message_id for h in hits]
    if scoped:
        assert {h.session_id for h in hits} == {session.id}
    reach_back = await store.search.search("oldest", session_id=session_id)
    assert [h.message_id for h in reach_back] == [oldest]


@pytest.mark.parametrize("share", [0, 10**9], ids=["owner-ids-first", "matches-first"])
async def test_an_owner_search_finds_the_owners_own_matches_either_way(
    store: SqlSessionStore, monkeypatch: pytest.MonkeyPatch, share: int
) -> None:
    """A small owner's search keeps the matches among the owner's own message ids; a large
    owner's joins each match to its session. Both return exactly the owner's hits, newest
    window and filters included, and never another owner's (SQLite picks by the owner's share
    of the messages, `OWNER_SET_SHARE`; 0 forces the first way, 10**9 the second)."""
    monkeypatch.setattr("state.search.OWNER_SET_SHARE", share)
    big = await store.sessions.create_session(platform="http", owner="http:big")
    small = await store.sessions.create_session(platform="http", owner="http:small")
    for n in range(40):
        await store.transcript.append(big.id, [user_message(f"the usual cases, number {n}")])
    mine = [user_message("my cases, the first"), assistant_message("cases answered")]
    await store.transcript.append(small.id, mine)
    hits = await store.search.search("cases", owner="http:small", limit=50)
    assert sorted(h.message_id for h in hits) == sorted(m["_id"] for m in mine)
    said = await store.search.search("cases", owner="http:small", role="user")
    assert [h.message_id for h in said] == [mine[0]["_id"]]
    assert "[cases]" in said[0].snippet
    theirs = await store.search.search("cases", owner="http:big", limit=50)
    assert len(theirs) == 40 and {h.session_id for h in theirs} == {big.id}
    assert await store.search.search("cases", owner="http:nobody") == []


async def test_a_small_owner_is_searched_through_their_own_ids(tmp_path: Path) -> None:
    """With the shipped bounds, an owner holding a few of many messages takes the owner-first
    way for a word that is not rare (the way that keeps a common word's search fast for them),
    and a rare word or a large owner goes through the matches."""
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    try:
        big = await store.sessions.create_session(owner="http:big")
        small = await store.sessions.create_session(owner="http:small")
        await store.transcript.append(big.id, [user_message(f"filler {n}") for n in range(200)])
        mine = [user_message(f"note {n} of mine") for n in range(7)]
        await store.transcript.append(small.id, [*mine, user_message("zephyr, once")])
        asked = [("http:small", '"filler"'), ("http:small", '"zephyr"'), ("http:big", '"filler"')]

        def ways(conn: Any) -> tuple[bool, ...]:
            return tuple(_owner_first(conn, owner, q) for owner, q in asked)

        # a common word: owner first; a word in fewer than a quarter of the owner's own
        # messages: through the matches; a large owner: through the matches
        assert await store._read("probe", ways) == (True, False, False)
    finally:
        await store.aclose()
