"""Stored files: once by hash on disk, a row per owner, read only by the owner who sent them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from state import MediaStore, SqlSessionStore, sha256_of
from state.records import message_from_row, row_from_message


async def test_put_and_read_back(store: SqlSessionStore, tmp_path: Path) -> None:
    """The bytes come back for their owner; the row holds what was sniffed."""
    media = MediaStore(store, tmp_path / "media")
    data = b"\x89PNG fake bytes" * 100
    stored = await media.put("telegram:1", data, kind="image", mime="image/png", width=3, height=2)
    assert stored.sha256 == sha256_of(data)
    assert await media.read("telegram:1", stored.sha256) == data
    info = await media.info("telegram:1", stored.sha256)
    assert info is not None and (info.kind, info.size_bytes, info.width) == ("image", len(data), 3)
    assert media.path_of(stored.sha256).read_bytes() == data


async def test_second_owner_cannot_read_by_hash(store: SqlSessionStore, tmp_path: Path) -> None:
    """B knowing A's hash gets nothing: no bytes, no row."""
    media = MediaStore(store, tmp_path / "media")
    stored = await media.put("telegram:1", b"alice's receipt", kind="text", mime="text/plain")
    assert await media.read("telegram:2", stored.sha256) is None
    assert await media.info("telegram:2", stored.sha256) is None
    assert await media.read("http:bob", stored.sha256) is None


async def test_same_bytes_stored_once_owned_twice(store: SqlSessionStore, tmp_path: Path) -> None:
    """The same photo from two people is one file and two rows; each reads it as theirs."""
    media = MediaStore(store, tmp_path / "media")
    data = b"the same meme" * 50
    a = await media.put("telegram:1", data, kind="other", mime="application/octet-stream")
    b, again = await asyncio.gather(
        media.put("discord:9", data, kind="other", mime="application/octet-stream"),
        media.put("telegram:1", data, kind="other", mime="application/octet-stream"),
    )
    assert a.sha256 == b.sha256 == again.sha256
    files = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
    assert files == [media.path_of(a.sha256)]
    assert await media.read("discord:9", a.sha256) == data


@pytest.mark.parametrize("bad", ["../../etc/passwd", "AB" * 32, "", "a" * 63, "a" * 64 + "/x"])
async def test_bad_hashes_read_nothing(store: SqlSessionStore, tmp_path: Path, bad: str) -> None:
    """Anything but a lowercase sha256 hex digest is refused before touching the disk."""
    media = MediaStore(store, tmp_path / "media")
    assert await media.read("telegram:1", bad) is None
    with pytest.raises(ValueError):
        media.path_of(bad)


def test_message_rows_keep_references_not_bytes() -> None:
    """A message's `_media` references round-trip through its row; no other `_` key does."""
    ref = {"sha256": "cd" * 32, "owner": "telegram:1", "kind": "image", "mime": "image/png"}
    msg = {"role": "user", "content": "look", "_media": [ref], "_persisted": True}
    row = row_from_message(msg, session_id="s", position=0)  # type: ignore[arg-type]
    assert row["extra"] == {"_media": [ref]} and row["content"] == "look"
    back = message_from_row({**row, "id": 7})
    assert back["_media"] == [ref] and back["content"] == "look"
