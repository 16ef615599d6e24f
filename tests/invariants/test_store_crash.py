"""A process killed inside archive_and_compact leaves the SQLite session fully before or after."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from agent.messages import assistant_message, system_message, user_message
from state import SqlSessionStore

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, json, os, signal, sys
from state import SqlSessionStore

url, session_id, payload, kill_at = sys.argv[1:5]

def hook(step):
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

async def main():
    store = await SqlSessionStore.open(url, fault_hook=hook)
    await store.transcript.archive_and_compact(session_id, json.loads(payload), kind="batch")
    if kill_at == "after-commit":
        os.kill(os.getpid(), signal.SIGKILL)
    await store.aclose()

asyncio.run(main())
"""


async def _state(store: SqlSessionStore, session_id: str) -> dict[str, Any]:
    async with store._engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT id, position, active, compacted, content FROM messages "
                    "WHERE session_id = :s ORDER BY id"
                ),
                {"s": session_id},
            )
        ).all()
        integrity = (await conn.execute(text("PRAGMA integrity_check"))).scalar()
        await conn.execute(text("INSERT INTO messages_fts(messages_fts) VALUES('integrity-check')"))
    active = [m["content"] for m in await store.transcript.load_active(session_id)]
    info = await store.sessions.get_session(session_id)
    return {
        "rows": [tuple(r) for r in rows],
        "active": active,
        "integrity": integrity,
        "counters": (info.active_messages, info.total_messages),
        "compactions": info.compactions,
    }


async def _crash_case(tmp_path: Path, kill_at: str) -> tuple[dict, dict, dict, list[str]]:
    url = f"sqlite+aiosqlite:///{tmp_path / kill_at / 'state.db'}"
    store = await SqlSessionStore.open(url)
    try:
        info = await store.sessions.create_session()
        msgs = [system_message("s")]
        for i in range(30):
            msgs += [user_message(f"ask {i}"), assistant_message(f"reply {i}")]
        await store.transcript.append(info.id, msgs)
        new_active = [
            {**msgs[0], "content": "s + note"},
            {"role": "user", "content": "[summary]", "_kind": "summary"},
            *msgs[-2:],
        ]
        before = await _state(store, info.id)
    finally:
        await store.aclose()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        url,
        info.id,
        json.dumps(new_active),
        kill_at,
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == -9, err.decode()[-2000:]
    store = await SqlSessionStore.open(url)
    try:
        after = await _state(store, info.id)
    finally:
        await store.aclose()
    return before, after, {"rows": None}, [m["content"] for m in new_active]


KILL_POINTS = [
    "archive_and_compact:renumbered",  # rows moved, nothing archived yet
    "archive_and_compact:inserted",  # archived and inserted, counters not yet updated
    "archive_and_compact:counted",  # every statement done, COMMIT not reached
    "after-commit",
]
"""Each kill costs a Python start-up; every step is covered by the exception tests as well."""


async def test_killed_process_leaves_session_before_or_after(tmp_path: Path) -> None:
    """SIGKILL at every step: the reopened database is intact and holds the old or new state,
    compaction counter included."""
    results = await asyncio.gather(*(_crash_case(tmp_path, k) for k in KILL_POINTS))
    for kill_at, (before, after, _, expected_active) in zip(KILL_POINTS, results, strict=True):
        assert after["integrity"] == "ok", kill_at
        if kill_at == "after-commit":
            assert after["active"] == expected_active
            assert after["counters"] == (4, 63)
            assert after["compactions"] == 1  # counted in the compaction's own transaction
            assert sum(1 for r in after["rows"] if not r[2]) == 59
        else:
            assert after == before, f"half-written state after a kill at {kill_at}"


@pytest.mark.parametrize("kill_at", ["append:inserted"])
async def test_killed_append_leaves_nothing(tmp_path: Path, kill_at: str) -> None:
    """SIGKILL inside an append leaves no partial batch behind."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    store = await SqlSessionStore.open(url)
    info = await store.sessions.create_session()
    await store.aclose()
    script = CHILD.replace(
        'await store.transcript.archive_and_compact(session_id, json.loads(payload), kind="batch")',
        "await store.transcript.append(session_id, json.loads(payload))",
    )
    batch = [{"role": "user", "content": f"m{i}"} for i in range(50)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        url,
        info.id,
        json.dumps(batch),
        kill_at,
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == -9, err.decode()[-2000:]
    store = await SqlSessionStore.open(url)
    try:
        assert await store.transcript.load_active(info.id) == []
        assert (await store.sessions.get_session(info.id)).total_messages == 0
    finally:
        await store.aclose()
