"""One message appended alone (the driver's cursor on SQLite, `state._prepared`) is stored exactly
as when appended with others (SQLAlchemy's executemany): every column, JSON ones included."""

from __future__ import annotations

from typing import Any

from state import SqlSessionStore


def _rich(n: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": f"part {n}"}, {"type": "text", "text": "ü ☃"}],
        "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
        "name": "helper",
        "reasoning": {"kept": [1, None, True]},
        "_kind": "normal",
    }


async def test_one_message_alone_is_stored_like_one_of_several(store: SqlSessionStore) -> None:
    alone, together = await store.sessions.create_session(), await store.sessions.create_session()
    single = [_rich(1)]
    pair = [_rich(1), {"role": "tool", "tool_call_id": "c1", "content": "done"}]
    await store.transcript.append(alone.id, single)
    await store.transcript.append(together.id, pair)
    assert isinstance(single[0]["_id"], int) and single[0]["_persisted"] is True
    (got,) = await store.transcript.load_active(alone.id)
    want = (await store.transcript.load_active(together.id))[0]
    drop = ("_id", "_created_at")
    assert {k: v for k, v in got.items() if k not in drop} == {
        k: v for k, v in want.items() if k not in drop
    }
    assert got["_id"] == single[0]["_id"] and got["tool_calls"] == _rich(1)["tool_calls"]
    info = await store.sessions.get_session(alone.id)
    assert info is not None and (info.total_messages, info.active_messages) == (1, 1)


async def test_an_in_memory_store_appends_and_searches() -> None:
    """`:memory:` runs through aiosqlite (no worker threads): the same operations work there."""
    store = await SqlSessionStore.open("sqlite+aiosqlite:///:memory:")
    try:
        info = await store.sessions.create_session()
        one = [{"role": "user", "content": "a lone zephyr"}]
        await store.transcript.append(info.id, one)
        await store.transcript.append(
            info.id, [_rich(2), {"role": "user", "content": "zephyr twice"}]
        )
        assert isinstance(one[0]["_id"], int)
        hits = await store.search.search("zephyr")
        assert sorted(h.message_id for h in hits) == sorted(
            m["_id"]
            for m in await store.transcript.load_active(info.id)
            if "zephyr" in str(m["content"])
        )
    finally:
        await store.aclose()


async def test_direct_binding_gives_what_sqlalchemy_builds(store: SqlSessionStore) -> None:
    """`_Form.arguments` reads values straight from the caller's mapping; SQLAlchemy's own
    `construct_params` (the `direct=False` path) is the reference, literals such as
    `version + 1` and JSON columns included, and a missing value is refused as it refuses it."""
    import dataclasses

    import pytest
    from sqlalchemy.exc import InvalidRequestError

    from state._statements import _INSERT_ONE, _RESERVING
    from state.records import row_from_message
    from state.values import Usage

    info = await store.sessions.create_session()
    await store.transcript.append(info.id, [_rich(1)])
    await store.transcript.append(info.id, [_rich(2)], usage=Usage(input_tokens=3))
    row = row_from_message(_rich(3), session_id=info.id, position=9, now=1.5)
    reserve = {"p_sid": info.id, "p_n": 1, "p_now": 2.5, "p_input": 3, "p_output": 4}
    reserve |= {"p_cache_write": 0, "p_cache_read": 0, "p_prompt": 7}
    for prepared, params in ((_INSERT_ONE, row), (_RESERVING[True], reserve)):
        forms = list(prepared._forms.values())  # one per store (dialect) of this test run
        assert forms
        for form in forms:
            assert form.direct
            reference = dataclasses.replace(form, direct=False)
            assert form.arguments(params) == reference.arguments(params)
            missing = {k: v for k, v in params.items() if k not in ("p_sid", "session_id")}
            with pytest.raises(InvalidRequestError):
                reference.arguments(missing)
            with pytest.raises(InvalidRequestError):
                form.arguments(missing)
