"""What the store does with text no database keeps, over-long ids, a full disk and damage.

Contracts, from the databases themselves:
- PostgreSQL refuses NUL in `text` ("invalid byte sequence for encoding "UTF8": 0x00") and the
  escape `\\u0000` in `jsonb` ("unsupported Unicode escape sequence"),
  https://www.postgresql.org/docs/current/datatype-json.html; it enforces VARCHAR(n).
- UTF-8 cannot encode a lone surrogate (Python raises UnicodeEncodeError; SQLite's driver too).
- SQLite answers SQLITE_FULL ("database or disk is full") when a write needs a page it cannot
  get, whether the disk is full or `PRAGMA max_page_count` is reached,
  https://sqlite.org/rescode.html#full and https://sqlite.org/pragma.html#pragma_max_page_count;
  a damaged file is SQLITE_CORRUPT / SQLITE_NOTADB, and `PRAGMA quick_check` reports damage.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import InvalidRecord, StoreCorrupt, StoreError, StoreFull, StoreUnavailable
from state import SqlSessionStore
from state._faults import classify_failure
from state.values import MAX_ID_CHARS, ChatMessage, storable_text
from tests.state.fixtures import StoreTarget
from tests.waits import SLOW_WAIT_S

HOSTILE = "x\ud800y \x00 z \udcff end \ud83d\ude00"
"""A lone high surrogate, NUL, a surrogate-escaped byte (argv's `$'\\xff'`), a valid pair."""


# -- the pure part --------------------------------------------------------------------------------


@given(st.text())
def test_storable_text_always_encodes_and_keeps_good_text(text: str) -> None:
    """Any str becomes UTF-8-encodable text without NUL; valid text without NUL is untouched
    (the same object), and cleaning twice changes nothing more."""
    cleaned = storable_text(text)
    cleaned.encode("utf-8")
    assert "\x00" not in cleaned
    assert storable_text(cleaned) == cleaned
    if "\x00" not in text and not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert cleaned is text


def test_storable_text_joins_pairs_and_replaces_the_rest() -> None:
    assert storable_text(HOSTILE) == "x\ufffdy \ufffd z \ufffd end \U0001f600"


class _SqliteError(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.sqlite_errorname = name


class _PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("cause", "kind"),
    [
        (_SqliteError("SQLITE_FULL"), StoreFull),
        (_SqliteError("SQLITE_CORRUPT"), StoreCorrupt),
        (_SqliteError("SQLITE_CORRUPT_INDEX"), StoreCorrupt),
        (_SqliteError("SQLITE_NOTADB"), StoreCorrupt),
        (_SqliteError("SQLITE_BUSY"), StoreUnavailable),
        (_SqliteError("SQLITE_CONSTRAINT_UNIQUE"), StoreError),
        (_PgError("53100"), StoreFull),
        (_PgError("XX001"), StoreCorrupt),
        (_PgError("08006"), StoreUnavailable),
        (_PgError("57P01"), StoreUnavailable),
        (_PgError("40P01"), StoreUnavailable),
        (_PgError("23505"), StoreError),
        (ConnectionRefusedError(111, "Connection refused"), StoreUnavailable),
        (ValueError("a bug"), StoreError),
    ],
)
def test_driver_failures_are_classified(cause: BaseException, kind: type[StoreError]) -> None:
    """Result codes (https://sqlite.org/rescode.html) and SQLSTATEs
    (https://www.postgresql.org/docs/current/errcodes-appendix.html) map to what a caller
    does next: refuse, retry later, wait for space, or stop writing."""
    assert classify_failure(cause) is kind


# -- hostile text and ids, on both databases ------------------------------------------------------


async def test_hostile_text_is_stored_everywhere_a_message_has_text(
    store: SqlSessionStore,
) -> None:
    """Content, blocks, tool-call arguments and extra keys with NUL and surrogates are stored
    (as U+FFFD) on SQLite and PostgreSQL, read back equal to what `storable_text` makes of
    them, and found by search."""
    info = await store.sessions.create_session(title=HOSTILE, user_id=HOSTILE, chat_key=HOSTILE)
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": HOSTILE}}
    messages: list[ChatMessage] = [
        {"role": "user", "content": f"find-me {HOSTILE}"},
        {"role": "assistant", "content": [{"type": "text", "text": HOSTILE}], "tool_calls": [call]},  # type: ignore[list-item]
        {"role": "tool", "tool_call_id": "c1", "content": HOSTILE, "name": "t"},
    ]
    await store.transcript.append(info.id, messages)
    clean = storable_text(HOSTILE)
    loaded = await store.transcript.load_active(info.id)
    assert loaded[0]["content"] == f"find-me {clean}"
    assert loaded[1]["content"] == [{"type": "text", "text": clean}]
    assert loaded[1]["tool_calls"][0]["function"]["arguments"] == clean
    assert loaded[2]["content"] == clean
    session = await store.sessions.get_session(info.id)
    assert session is not None and session.title == clean and session.user_id == clean
    hits = await store.search.search("find-me", session_id=info.id)
    assert [h.message_id for h in hits] == [loaded[0]["_id"]]


async def test_long_ids_fit_and_longer_ones_are_refused_by_name(store: SqlSessionStore) -> None:
    """A 300-character user id (an HTTP client's `user`) is kept on PostgreSQL too, where it
    was a StoreError against VARCHAR(255); past MAX_ID_CHARS the store refuses it naming the
    field, before the database sees it, and nothing is written."""
    info = await store.sessions.get_or_create_for_chat("http", "k" * 300, user_id="u" * 300)
    assert info.user_id == "u" * 300
    before = await store.sessions.list_sessions()
    with pytest.raises(InvalidRecord, match="user_id is too long: 1025 characters"):
        await store.sessions.get_or_create_for_chat("http", "k2", user_id="u" * (MAX_ID_CHARS + 1))
    with pytest.raises(InvalidRecord, match="tool_call_id"):
        await store.transcript.append(
            info.id, [{"role": "tool", "tool_call_id": "c" * 2_000, "content": "x"}]
        )
    assert len(await store.sessions.list_sessions()) == len(before)
    assert await store.transcript.load_active(info.id) == []


# -- a full disk, damage, a directory (SQLite) -----------------------------------------------------


def _sqlite(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


async def test_a_full_database_refuses_the_write_and_recovers_when_space_returns(
    tmp_path: Path,
) -> None:
    """SQLITE_FULL is StoreFull with what to do; nothing half-written; once space is back
    (here: the page limit raised) the same store writes again, with no restart."""
    path = tmp_path / "state.db"
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{path}")
    try:
        info = await store.sessions.create_session()
        await store.transcript.append(info.id, [{"role": "user", "content": "before"}])
        pages = _sqlite(path).execute("PRAGMA page_count").fetchone()[0]
        limit = f"PRAGMA max_page_count = {pages}"
        await store._write("limit", lambda conn: conn.exec_driver_sql(limit))
        big: list[ChatMessage] = [{"role": "user", "content": "y" * 200_000}]
        with pytest.raises(StoreFull, match="is full; free some space"):
            await store.transcript.append(info.id, big)
        assert [m["content"] for m in await store.transcript.load_active(info.id)] == ["before"]
        await store._write("unlimit", lambda conn: conn.exec_driver_sql(
            "PRAGMA max_page_count = 1073741823"
        ))  # fmt: skip
        await store.transcript.append(info.id, big)
        assert len(await store.transcript.load_active(info.id)) == 2
    finally:
        await store.aclose()


def _damage(path: Path) -> None:
    """Overwrite the cell pointers of the pages holding message rows with garbage: the schema
    and the file header stay intact, so the file still opens (and the damage does not move
    with the schema's layout). SQLite file format, "B-tree Pages": a table leaf page starts
    with 0x0D, its cell pointer array follows the 8-byte page header."""
    assert not Path(f"{path}-wal").exists()
    data = bytearray(path.read_bytes())
    page = 4096
    damaged = 0
    for n in range(1, len(data) // page):
        start = n * page
        if data[start] == 0x0D and b"row " in data[start : start + page]:
            data[start + 8 : start + 40] = b"\xa5" * 32
            damaged += 1
    assert damaged, "no page of message rows found to damage"
    path.write_bytes(bytes(data))


async def test_a_damaged_file_is_refused_at_open_with_a_recovery_hint(tmp_path: Path) -> None:
    """`verify` runs quick_check before anything writes: damage in the middle of the file
    (invisible to opening it) is StoreCorrupt naming `.recover`; without `verify` the store
    still opens for reading (to rescue the sessions), and the first operation that meets the
    damage stops every later write."""
    path = tmp_path / "state.db"
    url = f"sqlite+aiosqlite:///{path}"
    store = await SqlSessionStore.open(url)
    try:
        info = await store.sessions.create_session()
        for n in range(60):
            await store.transcript.append(
                info.id, [{"role": "user", "content": f"row {n} " + "w" * 3_000}]
            )
    finally:
        await store.aclose()
    _damage(path)  # closed cleanly first: every page is in the file, none in a WAL
    with pytest.raises(StoreCorrupt, match=r"\.recover"):
        await SqlSessionStore.open(url, verify=True)
    store = await SqlSessionStore.open(url)
    try:
        with pytest.raises(StoreCorrupt):
            for _ in range(3):
                await store.transcript.load_active(info.id)
                await store.search.search("row", session_id=info.id)
        with pytest.raises(StoreCorrupt, match="refused"):
            await store.transcript.append(info.id, [{"role": "user", "content": "after"}])
    finally:
        await store.aclose()


async def test_garbage_and_a_directory_as_the_database_are_one_sentence(tmp_path: Path) -> None:
    """A file that is not a database is StoreCorrupt; a directory is named as one."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database " * 500)
    with pytest.raises(StoreCorrupt, match="damaged"):
        await SqlSessionStore.open(f"sqlite+aiosqlite:///{junk}")
    folder = tmp_path / "state.db"
    folder.mkdir()
    with pytest.raises(StoreError, match="is a directory; state.url must name a file"):
        await SqlSessionStore.open(f"sqlite+aiosqlite:///{folder}")


async def test_integrity_check_on_a_sound_file_and_on_postgresql(
    fresh_store_target: StoreTarget,
) -> None:
    """A sound database has no problems, quick or full; PostgreSQL checks itself ([])."""
    store = await fresh_store_target.open(verify=True)
    try:
        assert await store.check_integrity() == []
        assert await store.check_integrity(full=True) == []
    finally:
        await store.aclose()


_CHECK_MEMORY = """
import asyncio, sys
from state import SqlSessionStore

def rss_kib() -> int:
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))

async def main() -> None:
    store = await SqlSessionStore.open(sys.argv[1])
    before = rss_kib()
    problems = await store.check_integrity()
    grew = rss_kib() - before
    await store.aclose()
    print(grew if problems == [] else problems)

asyncio.run(main())
"""


def test_the_integrity_check_does_not_keep_a_big_file_in_memory(tmp_path: Path) -> None:
    """`quick_check` reads every page of the file. It reads them through a 2 MiB cache, not the
    connection's 32 MiB one, so opening a big store with `verify` (every `hermes chat -q`) does
    not hold the file in memory: after checking 48 MB of pages the process's resident memory
    (VmRSS, proc(5)) is less than 12 MiB larger. With the connection's cache it was ~32 MiB."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    root = Path(__file__).resolve().parents[2]
    opened = subprocess.run(  # the schema, then 48 MB of other pages beside it
        [sys.executable, "-c", _CHECK_MEMORY, url],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=SLOW_WAIT_S,
        check=False,
    )
    assert opened.returncode == 0, opened.stderr[-2000:]
    conn = sqlite3.connect(tmp_path / "state.db")
    with conn:
        conn.execute("CREATE TABLE ballast (x BLOB)")
        conn.executemany("INSERT INTO ballast VALUES (randomblob(4000))", [()] * 12_000)
    conn.close()  # the last connection checkpoints the WAL: the pages are in the file
    checked = subprocess.run(
        [sys.executable, "-c", _CHECK_MEMORY, url],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=SLOW_WAIT_S,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert int(checked.stdout.splitlines()[-1]) < 12 * 1024
