"""SqlSessionStore on SQLite and PostgreSQL: sessions, appends, routing, counters, show and export."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent.errors import StoreError
from agent.messages import assistant_message, system_message, tool_message, user_message
from agent.providers.base import Usage
from state import SqlSessionStore
from tests.state.fixtures import StoreTarget


def _turn(i: int) -> list:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    return [
        user_message(f"question {i}"),
        assistant_message(None, [call]),
        tool_message(f"c{i}", "ls", f"result {i}"),
        assistant_message(f"answer {i}"),
    ]


async def test_create_and_get_session(store: SqlSessionStore) -> None:
    """A created session reads back with its fields and zeroed counters."""
    info = await store.sessions.create_session(
        platform="telegram", chat_key="42", user_id="u1", title="T", model="m"
    )
    got = await store.sessions.get_session(info.id)
    assert got == info
    assert (got.platform, got.chat_key, got.user_id, got.title, got.model) == (
        "telegram",
        "42",
        "u1",
        "T",
        "m",
    )
    assert (got.total_messages, got.active_messages, got.input_tokens, got.meta) == (0, 0, 0, {})
    assert await store.sessions.get_session("nope") is None


async def test_append_stamps_in_place_and_is_idempotent(store: SqlSessionStore) -> None:
    """Appending stamps `_id`/`_persisted` on the dicts and never inserts a message twice."""
    info = await store.sessions.create_session()
    msgs = [system_message("sys"), *_turn(1)]
    assert await store.transcript.append(info.id, msgs) == 5
    assert all(m["_persisted"] for m in msgs)
    assert len({m["_id"] for m in msgs}) == 5
    msgs += _turn(2)
    assert await store.transcript.append(info.id, msgs) == 4
    assert await store.transcript.append(info.id, msgs) == 0
    loaded = await store.transcript.load_active(info.id)
    assert [m["_id"] for m in loaded] == [m["_id"] for m in msgs]
    assert [m["content"] for m in loaded] == [m["content"] for m in msgs]
    assert loaded[2]["tool_calls"] == msgs[2]["tool_calls"]
    assert loaded[3]["tool_call_id"] == "c1" and loaded[3]["name"] == "ls"
    assert all(m["_kind"] == "normal" and m["_persisted"] for m in loaded)
    session = await store.sessions.get_session(info.id)
    assert (session.total_messages, session.active_messages) == (9, 9)


async def test_append_to_unknown_session_raises_store_error(store: SqlSessionStore) -> None:
    """A missing session is a StoreError and the messages stay unstamped."""
    msgs = [user_message("hi")]
    with pytest.raises(StoreError, match="no session"):
        await store.transcript.append("missing", msgs)
    assert "_id" not in msgs[0]


async def test_concurrent_appends_from_two_workers_do_not_interleave(
    store: SqlSessionStore, open_store
) -> None:
    """Two stores appending batches to one session keep each batch contiguous and complete."""
    other = await open_store()
    try:
        info = await store.sessions.create_session()
        batches = [[user_message(f"b{b} m{i}") for i in range(20)] for b in range(8)]
        await asyncio.wait_for(
            asyncio.gather(
                *(
                    (store if b % 2 else other).transcript.append(info.id, batch)
                    for b, batch in enumerate(batches)
                )
            ),
            timeout=30,
        )
        loaded = [m["content"] for m in await store.transcript.load_active(info.id)]
        assert len(loaded) == 160
        for start in range(0, 160, 20):
            prefix = loaded[start].split()[0]
            assert [c.split()[0] for c in loaded[start : start + 20]] == [prefix] * 20
    finally:
        await other.aclose()


async def test_get_or_create_for_chat_routes_one_session_per_chat(store: SqlSessionStore) -> None:
    """The same chat gets the same session; another chat or platform gets its own."""
    a = await store.sessions.get_or_create_for_chat("telegram", "1", user_id="u", model="m")
    assert (await store.sessions.get_or_create_for_chat("telegram", "1")).id == a.id
    assert (await store.sessions.get_or_create_for_chat("telegram", "2")).id != a.id
    assert (await store.sessions.get_or_create_for_chat("discord", "1")).id != a.id
    assert (a.platform, a.chat_key, a.user_id, a.model) == ("telegram", "1", "u", "m")


async def test_concurrent_get_or_create_yields_one_session(
    store: SqlSessionStore, open_store
) -> None:
    """Racing workers routing a new chat agree on a single session."""
    other = await open_store()
    try:
        infos = await asyncio.wait_for(
            asyncio.gather(
                *(
                    (store if i % 2 else other).sessions.get_or_create_for_chat("tg", "race")
                    for i in range(6)
                )
            ),
            timeout=30,
        )
        assert len({i.id for i in infos}) == 1
    finally:
        await other.aclose()


async def test_start_new_for_chat_ends_the_old_session(store: SqlSessionStore) -> None:
    """`/new` ends the current session with reason "new" and routes the chat to a fresh one."""
    old = await store.sessions.get_or_create_for_chat("discord", "c")
    new = await store.sessions.start_new_for_chat("discord", "c")
    assert new.id != old.id
    assert (await store.sessions.get_session(old.id)).end_reason == "new"
    assert (await store.sessions.get_or_create_for_chat("discord", "c")).id == new.id
    fresh = await store.sessions.start_new_for_chat("discord", "never-seen")
    assert fresh.end_reason is None


async def test_rotate_moves_active_set_to_child_session(store: SqlSessionStore) -> None:
    """Rotation writes new_active to a child session, ends the parent and moves the chat route."""
    parent = await store.sessions.get_or_create_for_chat("telegram", "9", model="m")
    msgs = _turn(1)
    await store.transcript.append(parent.id, msgs)
    new_active = [{"role": "user", "content": "summary", "_kind": "summary"}, *msgs[-2:]]
    child = await store.transcript.rotate(parent.id, new_active)
    assert child.parent_session_id == parent.id
    assert (child.platform, child.chat_key, child.model) == ("telegram", "9", "m")
    assert (child.active_messages, child.total_messages) == (3, 3)
    assert (await store.sessions.get_session(parent.id)).end_reason == "compression"
    assert (await store.sessions.get_or_create_for_chat("telegram", "9")).id == child.id
    loaded = await store.transcript.load_active(child.id)
    assert [m["_id"] for m in loaded] == [m["_id"] for m in new_active]
    assert loaded[0]["_kind"] == "summary"
    assert len(await store.transcript.load_active(parent.id)) == 4


async def test_record_usage_and_compactions_accumulate(store: SqlSessionStore) -> None:
    """Usage adds to the totals and sets the last prompt size; compaction kinds count apart."""
    info = await store.sessions.create_session()
    await store.meta.record_usage(
        info.id, Usage(input_tokens=10, output_tokens=5, cache_write_tokens=100)
    )
    await store.meta.record_usage(
        info.id, Usage(input_tokens=3, output_tokens=2, cache_read_tokens=100)
    )
    for kind in ("batch", "micro", "micro", "native"):
        await store.meta.record_compaction(info.id, kind=kind)
    got = await store.sessions.get_session(info.id)
    assert (got.input_tokens, got.output_tokens) == (13, 7)
    assert (got.cache_write_tokens, got.cache_read_tokens, got.last_prompt_tokens) == (
        100,
        100,
        103,
    )
    assert (got.compactions, got.micro_compactions, got.native_compactions) == (1, 2, 1)
    with pytest.raises(ValueError, match="unknown compaction kind"):
        await store.meta.record_compaction(info.id, kind="other")
    with pytest.raises(StoreError):
        await store.meta.record_usage("missing", Usage())


async def test_meta_merges_and_removes_keys(store: SqlSessionStore) -> None:
    """update_meta merges keys, None deletes one, and the dict is kept as JSON."""
    info = await store.sessions.create_session()
    await store.meta.update_meta(info.id, hygiene={"backoff_until": 12.5}, cursor=3)
    await store.meta.update_meta(info.id, cursor=None, codex=["b1"])
    assert await store.meta.get_meta(info.id) == {
        "hygiene": {"backoff_until": 12.5},
        "codex": ["b1"],
    }
    with pytest.raises(StoreError):
        await store.meta.get_meta("missing")


async def test_list_sessions_newest_first_with_platform_filter(store: SqlSessionStore) -> None:
    """Sessions list by last update, optionally for one platform, up to the limit."""
    a = await store.sessions.create_session(platform="cli")
    b = await store.sessions.create_session(platform="telegram")
    c = await store.sessions.create_session(platform="cli")
    await store.transcript.append(a.id, [user_message("touch")])
    assert [s.id for s in await store.sessions.list_sessions()] == [a.id, c.id, b.id]
    assert [s.id for s in await store.sessions.list_sessions(platform="cli")] == [a.id, c.id]
    assert len(await store.sessions.list_sessions(limit=1)) == 1


async def test_show_marks_archived_rows(store: SqlSessionStore) -> None:
    """show() is the active transcript; with include_archived every row carries its flags."""
    info = await store.sessions.create_session()
    msgs = [system_message("s"), *_turn(1)]
    await store.transcript.append(info.id, msgs)
    await store.transcript.archive_and_compact(
        info.id, [msgs[0], {"role": "user", "content": "sum", "_kind": "summary"}]
    )
    active = await store.transcript.show(info.id)
    assert [m["content"] for m in active] == ["s", "sum"]
    everything = await store.transcript.show(info.id, include_archived=True)
    assert len(everything) == 6
    assert [m["_active"] for m in everything] == [False] * 4 + [True, True]
    assert all(m["_compacted"] for m in everything[:4])
    with pytest.raises(StoreError):
        await store.transcript.show("missing")


async def test_export_jsonl_and_markdown_hold_every_row(store: SqlSessionStore) -> None:
    """Exports include archived rows, marked, and nothing beyond what was stored."""
    info = await store.sessions.create_session(title="trip")
    msgs = _turn(1)
    await store.transcript.append(info.id, msgs)
    await store.transcript.archive_and_compact(info.id, msgs[2:])
    lines = [json.loads(x) for x in (await store.transcript.export(info.id, "jsonl")).splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["id"] == info.id
    records = lines[1:]
    assert [r["content"] for r in records] == [m["content"] for m in msgs]
    assert [r["active"] for r in records] == [False, False, True, True]
    assert records[1]["tool_calls"][0]["function"]["name"] == "ls"
    md = await store.transcript.export(info.id, "md")
    assert md.startswith(f"# Session {info.id}")
    assert md.count("(archived: compaction)") == 2 and "question 1" in md and "Tool call `ls`" in md
    with pytest.raises(ValueError):
        await store.transcript.export(info.id, "csv")  # type: ignore[arg-type]


async def test_stats_count_everything(store: SqlSessionStore) -> None:
    """stats() counts sessions, active/archived/summary rows and token totals."""
    info = await store.sessions.create_session(platform="telegram")
    await store.sessions.create_session(platform="cli")
    msgs = _turn(1)
    await store.transcript.append(info.id, msgs)
    await store.transcript.archive_and_compact(
        info.id, [{"role": "user", "content": "s", "_kind": "summary"}]
    )
    await store.meta.record_usage(info.id, Usage(input_tokens=7))
    stats = await store.sessions.stats()
    assert stats["sessions"] == 2 and stats["platforms"] == {"telegram": 1, "cli": 1}
    assert (stats["messages"], stats["active_messages"], stats["archived_messages"]) == (5, 1, 4)
    assert stats["summary_messages"] == 1 and stats["tokens"]["input"] == 7
    assert stats["db_bytes"] > 0 and stats["schema_version"] >= 1


async def test_reopen_keeps_everything(store_target: StoreTarget) -> None:
    """A store reopened on the same database sees the sessions and messages written before."""
    first = await store_target.open()
    info = await first.sessions.create_session()
    await first.transcript.append(info.id, _turn(1))
    await first.aclose()
    second = await store_target.open()
    try:
        assert len(await second.transcript.load_active(info.id)) == 4
    finally:
        await second.aclose()


@pytest.mark.parametrize(
    ("kind", "column"), [("batch", "compactions"), ("micro", "micro_compactions")]
)
async def test_compaction_counts_itself_and_forgets_the_stale_prompt_size(
    store: SqlSessionStore, kind: str, column: str
) -> None:
    """archive_and_compact(kind=...) counts the compaction and zeroes last_prompt_tokens in the
    same transaction: the reported prompt size described the rows it just replaced."""
    info = await store.sessions.create_session()
    msgs = [system_message("s"), *_turn(1), *_turn(2)]
    await store.transcript.append(info.id, msgs, usage=Usage(input_tokens=900))
    assert (await store.sessions.get_session(info.id)).last_prompt_tokens == 900
    await store.transcript.archive_and_compact(info.id, [msgs[0], *msgs[-4:]], kind=kind)  # type: ignore[arg-type]
    after = await store.sessions.get_session(info.id)
    assert getattr(after, column) == 1 and after.last_prompt_tokens == 0
    assert after.compactions + after.micro_compactions == 1
