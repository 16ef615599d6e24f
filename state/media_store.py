"""Stored files: the bytes once under a folder by sha256, one `media` row per owner of them.

Every read is by (owner, sha256): knowing a hash gets nobody a file they did not send. The
file is written (atomically, by rename) before its row, so a row never names a missing file;
the same bytes from a second owner or a second time are not written again.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from state._connection import StoreConnection
from state.models import MEDIA
from state.store_errors import InvalidRecord
from state.values import MAX_ID_CHARS, storable_text

__all__ = ["MediaStore", "StoredMedia", "sha256_of"]

_HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_NAME_CHARS = 255
MAX_MIME_CHARS = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMedia:
    """One owner's stored file (its row)."""

    owner: str
    sha256: str
    kind: str
    mime: str
    size_bytes: int
    width: int | None = None
    height: int | None = None
    name: str | None = None
    created_at: float = 0.0


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class MediaStore:
    """Files of people, kept once by content hash under `root`, rows in the session store."""

    def __init__(self, db: StoreConnection, root: Path) -> None:
        self._db = db
        self.root = root
        self._key = secrets.token_bytes(32)
        """Signs the marks `recall` leaves for images (this process only)."""

    def sign(self, owner: str, sha256: str) -> str:
        """A tag only this store can make for (`owner`, `sha256`)."""
        message = f"{owner}\x00{sha256}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]

    def verify(self, owner: str, sha256: str, tag: str) -> bool:
        return hmac.compare_digest(self.sign(owner, sha256), tag)

    def path_of(self, sha256: str) -> Path:
        """Where the bytes of `sha256` live (whether or not anyone stored them)."""
        if _HEX64.fullmatch(sha256) is None:
            raise ValueError("not a sha256 hex digest")
        return self.root / sha256[:2] / sha256

    async def put(
        self,
        owner: str,
        data: bytes,
        *,
        kind: str,
        mime: str,
        width: int | None = None,
        height: int | None = None,
        name: str | None = None,
    ) -> StoredMedia:
        """Keep `data` for `owner`; the same bytes again are the same file and the same row."""
        if not owner or len(owner) > MAX_ID_CHARS:
            raise InvalidRecord("owner", limit=MAX_ID_CHARS, got=len(owner))
        sha = sha256_of(data)
        await asyncio.to_thread(self._write_file, sha, data)
        shown = storable_text(name)[:MAX_NAME_CHARS] if name else None
        row = StoredMedia(
            owner=owner,
            sha256=sha,
            kind=kind,
            mime=mime[:MAX_MIME_CHARS],
            size_bytes=len(data),
            width=width,
            height=height,
            name=shown,
            created_at=time.time(),
        )

        def body(conn: Connection) -> StoredMedia:
            found = _row(conn, owner, sha)
            if found is not None:
                return found
            conn.execute(insert(MEDIA).values(**_values(row)))
            return row

        return await self._db._write("media_put", body)

    async def info(self, owner: str, sha256: str) -> StoredMedia | None:
        """`owner`'s file `sha256`, or None (not theirs, not stored, not a digest)."""
        if _HEX64.fullmatch(sha256) is None:
            return None
        return await self._db._read("media_info", lambda conn: _row(conn, owner, sha256))

    async def read(self, owner: str, sha256: str) -> bytes | None:
        """The bytes of `owner`'s file `sha256`, or None (not theirs, or gone from disk)."""
        if await self.info(owner, sha256) is None:
            return None
        try:
            return await asyncio.to_thread(self.path_of(sha256).read_bytes)
        except FileNotFoundError:
            return None

    def _write_file(self, sha: str, data: bytes) -> None:
        path = self.path_of(sha)
        if path.exists() and path.stat().st_size == len(data):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _row(conn: Connection, owner: str, sha256: str) -> StoredMedia | None:
    found = conn.execute(
        select(MEDIA).where(MEDIA.c.owner == owner, MEDIA.c.sha256 == sha256)
    ).one_or_none()
    if found is None:
        return None
    m: dict[str, Any] = dict(found._mapping)
    return StoredMedia(**m)


def _values(row: StoredMedia) -> dict[str, Any]:
    return {name: getattr(row, name) for name in StoredMedia.__slots__}
