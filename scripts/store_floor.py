"""The store beside plain `sqlite3` on the same file: the floor half of `bench_store.py`.

Same file, same schema, same FTS5 table and triggers, same rows, same connection settings
(`state.engine.SQLITE_PRAGMAS`: WAL, synchronous=NORMAL on both sides). Each repetition times
ours and the floor back to back, so machine load falls on both alike; figures are medians
(p50) and p95 over all repetitions, in milliseconds, with the ratio ours / floor.

- rare-word search: `store.search.search(word, limit=20)` against one plain FTS5 statement giving the
  same columns (`MATCH ... ORDER BY rank LIMIT 20` with `snippet()`, joined to the message and
  session rows), for words found in 0.002-0.05% of the messages;
- one append: `store.transcript.append(session, [message])` against `BEGIN IMMEDIATE; INSERT; COMMIT` of
  the same text (the FTS trigger fires in both);
- a turn's writes: the user message, then the reply with its usage (two appends, as the agent
  does: the user message is stored before the model is called);
- an owner's common word: a word in most messages, searched by an owner holding 0.5% of the
  sessions (through the owner's view, as every tool searches), against the plain statement
  with `AND s.owner = ?`.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from state import ReadScope, SqlSessionStore
from state.engine import SQLITE_PRAGMAS

SMALL_OWNER = "bench:small"
_INSERT = (
    "INSERT INTO messages (session_id, position, role, content, created_at, active, "
    "compacted, kind, token_estimate) VALUES (?, ?, 'user', ?, ?, 1, 0, 'normal', ?)"
)
_PLAIN_SEARCH = (
    "SELECT m.id, m.session_id, m.role, m.created_at, m.active, s.platform, "
    "snippet(messages_fts, 0, '[', ']', '…', 16) AS snippet, -rank AS rank "
    "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
    "JOIN sessions s ON s.id = m.session_id "
    "WHERE messages_fts MATCH ?{owner} ORDER BY rank LIMIT ?"
)


def _ms(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 3)


def _pair(
    ours: list[float], floor: list[float], cpu: tuple[list[float], list[float]]
) -> dict[str, Any]:
    return {
        "ours_p50_ms": _ms(ours, 0.5),
        "ours_p95_ms": _ms(ours, 0.95),
        "floor_p50_ms": _ms(floor, 0.5),
        "floor_p95_ms": _ms(floor, 0.95),
        "ratio_p50": round(statistics.median(ours) / statistics.median(floor), 2),
        "ratio_p95": round(_ms(ours, 0.95) / max(_ms(floor, 0.95), 1e-9), 2),
        "ours_cpu_p50_ms": _ms(cpu[0], 0.5),
        "floor_cpu_p50_ms": _ms(cpu[1], 0.5),
        "cpu_ratio_p50": round(statistics.median(cpu[0]) / max(statistics.median(cpu[1]), 1e-9), 2),
        "samples": len(ours),
    }


def plain_connection(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in SQLITE_PRAGMAS:
        conn.execute(pragma)
    return conn


async def _interleaved(
    ours: Callable[[int], Awaitable[Any]],
    floor: Callable[[int], Any],
    reps: int,
    cpu: tuple[list[float], list[float]],
    warm: int = 5,
) -> tuple[list[float], list[float]]:
    """Wall seconds of `reps` calls of each, back to back; CPU seconds (every thread of this
    process) go to `cpu`."""
    for i in range(warm):
        await ours(i)
        floor(i)
    a: list[float] = []
    b: list[float] = []
    for i in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        await ours(i)
        t1, c1 = time.perf_counter(), time.process_time()
        floor(i)
        t2, c2 = time.perf_counter(), time.process_time()
        a.append(t1 - t0)
        b.append(t2 - t1)
        cpu[0].append(c1 - c0)
        cpu[1].append(c2 - c1)
    return a, b


def rare_words(plain: sqlite3.Connection, vocab: list[str], rows: int, n: int = 20) -> list[str]:
    """Up to `n` words of the corpus found in 0.002-0.05% of the messages (at least 2)."""
    lo, hi = max(2, rows // 50_000), max(3, rows // 2_000)
    found = []
    for word in reversed(vocab):
        sql = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"
        count = plain.execute(sql, (f'"{word}"',)).fetchone()[0]
        if lo <= count <= hi:
            found.append(word)
            if len(found) == n:
                break
    return found


async def bench_floor(
    store: SqlSessionStore, path: str, vocab: list[str], text: str, *, rows: int, reps: int
) -> dict[str, Any]:
    """Every comparison above, on the store's open file `path` (already holding `rows`)."""
    plain = plain_connection(path)
    load_before = os.getloadavg()
    try:
        out: dict[str, Any] = {
            "assumptions": {
                "same_file_schema_rows": True,
                "messages": rows,
                "pragmas_both_sides": list(SQLITE_PRAGMAS),
                "interleaved": "each repetition times ours, then the floor",
                "floor": "Python sqlite3 on the event loop's thread: no thread hop, no "
                "SQLAlchemy; ours goes through the public API",
                "cpus": os.cpu_count(),
            }
        }
        out["rare_word_search"] = await _rare_search(store, plain, vocab, rows, reps)
        out["append_one"] = await _append_one(store, plain, text, reps)
        out["turn_writes"] = await _turn_writes(store, plain, text, max(20, reps // 2))
        out["owner_common_word"] = await _owner_common(store, plain, vocab, rows)
        out["assumptions"]["load_average_before_after"] = [
            round(load_before[0], 2),
            round(os.getloadavg()[0], 2),
        ]
        return out
    finally:
        plain.close()


async def _rare_search(
    store: SqlSessionStore, plain: sqlite3.Connection, vocab: list[str], rows: int, reps: int
) -> dict[str, Any]:
    words = rare_words(plain, vocab, rows)
    sql = _PLAIN_SEARCH.format(owner="")
    ours: list[float] = []
    floor: list[float] = []
    cpu: tuple[list[float], list[float]] = ([], [])
    hits = []
    for _ in range(max(1, reps // max(1, len(words)))):
        for word in words:
            a, b = await _interleaved(
                lambda _i, w=word: store.search.search(w, limit=20),
                lambda _i, w=word: plain.execute(sql, (f'"{w}"', 20)).fetchall(),
                1,
                cpu,
                warm=0,
            )
            ours += a
            floor += b
    for word in words:
        hits.append(len(await store.search.search(word, limit=20)))
    return {"words": len(words), "mean_hits": round(statistics.mean(hits), 1)} | _pair(
        ours, floor, cpu
    )


async def _append_one(
    store: SqlSessionStore, plain: sqlite3.Connection, text: str, reps: int
) -> dict[str, Any]:
    ours_sid = (await store.sessions.create_session(platform="bench")).id
    floor_sid = (await store.sessions.create_session(platform="bench")).id

    positions = itertools.count()

    def insert(_i: int) -> None:
        plain.execute("BEGIN IMMEDIATE")
        plain.execute(_INSERT, (floor_sid, next(positions), text, time.time(), len(text) // 4))
        plain.execute("COMMIT")

    async def append(_i: int) -> None:
        await store.transcript.append(ours_sid, [{"role": "user", "content": text}])

    cpu: tuple[list[float], list[float]] = ([], [])
    a, b = await _interleaved(append, insert, reps, cpu)
    return {"message_chars": len(text)} | _pair(a, b, cpu)


async def _turn_writes(
    store: SqlSessionStore, plain: sqlite3.Connection, text: str, reps: int
) -> dict[str, Any]:
    """What a turn without tools writes: the user message, then the reply and its usage."""
    from agent.providers.base import Usage

    ours_sid = (await store.sessions.create_session(platform="bench")).id
    floor_sid = (await store.sessions.create_session(platform="bench")).id

    positions = itertools.count()

    def writes(_i: int) -> None:
        for _ in (0, 1):
            plain.execute("BEGIN IMMEDIATE")
            plain.execute(_INSERT, (floor_sid, next(positions), text, time.time(), 60))
            plain.execute("COMMIT")

    async def turn(_i: int) -> None:
        await store.transcript.append(ours_sid, [{"role": "user", "content": text}])
        reply = {"role": "assistant", "content": text}
        await store.transcript.append(
            ours_sid, [reply], usage=Usage(input_tokens=900, output_tokens=60)
        )

    cpu: tuple[list[float], list[float]] = ([], [])
    a, b = await _interleaved(turn, writes, reps, cpu)
    return {"round_trips": 2, "floor": "two plain inserts, each committed"} | _pair(a, b, cpu)


async def _owner_common(
    store: SqlSessionStore, plain: sqlite3.Connection, vocab: list[str], rows: int
) -> dict[str, Any]:
    """A word in most messages, by an owner with 0.5% of the sessions (spread evenly)."""
    sessions = [r[0] for r in plain.execute("SELECT id FROM sessions ORDER BY created_at")]
    picked = sessions[::200]
    plain.execute("BEGIN IMMEDIATE")
    plain.executemany(
        "UPDATE sessions SET owner = ? WHERE id = ?", [(SMALL_OWNER, s) for s in picked]
    )
    plain.execute("COMMIT")
    share = {
        w: plain.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (f'"{w}"',)
        ).fetchone()[0]
        / max(1, rows)
        for w in vocab[:8]
    }
    word = max(share, key=lambda w: share[w])
    view = store.view(ReadScope(owner=SMALL_OWNER))
    sql = _PLAIN_SEARCH.format(owner=" AND s.owner = ?")
    cpu: tuple[list[float], list[float]] = ([], [])
    a, b = await _interleaved(
        lambda _i: view.search(word, limit=5, superseded_summaries=False),
        lambda _i: plain.execute(sql, (f'"{word}"', SMALL_OWNER, 5)).fetchall(),
        7,
        cpu,
        warm=1,
    )
    return {
        "word_doc_share": round(share[word], 3),
        "owner_sessions": len(picked),
        "owner_session_share": round(len(picked) / max(1, len(sessions)), 4),
    } | _pair(a, b, cpu)
