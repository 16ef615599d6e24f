"""What a database failure means for the caller: a pure classification of driver errors.

SQLite names its result codes (`sqlite3.Error.sqlite_errorname`, https://sqlite.org/rescode.html);
PostgreSQL gives a SQLSTATE (asyncpg's `sqlstate`, which SQLAlchemy's adapter copies;
https://www.postgresql.org/docs/current/errcodes-appendix.html). A failure is one of: the input
(InvalidRecord is raised before the database sees it, so not here), the database being
unavailable for now (retry later), full (retry once space is freed), or damaged (stop writing).
"""

from __future__ import annotations

from state.store_errors import StoreCorrupt, StoreError, StoreFull, StoreUnavailable

__all__ = ["classify_failure", "describe_failure", "explain_failure"]

_SQLITE_FULL = frozenset(
    {"SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_SHMSIZE"}
)
"""SHMSIZE: the WAL index (`-shm`) could not grow, which on a full disk is how a read fails."""
_SQLITE_CORRUPT_PREFIXES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_SQLITE_UNAVAILABLE_PREFIXES = (
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_IOERR",
    "SQLITE_CANTOPEN",
    "SQLITE_READONLY",
    "SQLITE_PROTOCOL",
    "SQLITE_NOMEM",
)
_PG_FULL = frozenset({"53100"})  # disk_full
_PG_CORRUPT = frozenset({"XX001", "XX002"})  # data_corrupted, index_corrupted
_PG_UNAVAILABLE_CLASSES = ("08", "53", "57", "58")
"""Connection exception, insufficient resources, operator intervention, system error."""
_PG_RETRY = frozenset({"40001", "40P01", "55P03"})
"""Serialization failure, deadlock, lock not available: another try will do."""


def classify_failure(cause: BaseException) -> type[StoreError]:
    """The StoreError subclass a driver exception stands for (StoreError: a bug or unknown)."""
    name = str(getattr(cause, "sqlite_errorname", "") or "")
    if name:
        if name in _SQLITE_FULL or "disk is full" in str(cause):
            return StoreFull
        if name.startswith(_SQLITE_CORRUPT_PREFIXES):
            return StoreCorrupt
        if name.startswith(_SQLITE_UNAVAILABLE_PREFIXES):
            return StoreUnavailable
        return StoreError
    state = str(getattr(cause, "sqlstate", "") or getattr(cause, "pgcode", "") or "")
    if state:
        if state in _PG_FULL:
            return StoreFull
        if state in _PG_CORRUPT:
            return StoreCorrupt
        if state in _PG_RETRY or state.startswith(_PG_UNAVAILABLE_CLASSES):
            return StoreUnavailable
        return StoreError
    if isinstance(cause, OSError | ConnectionError):  # no connection at all (refused, reset)
        return StoreUnavailable
    return StoreError


def describe_failure(kind: type[StoreError], where: str, dialect: str) -> str:
    """What the user can do about a failure of this kind (empty when nothing useful)."""
    if kind is StoreFull:
        return (
            f"the disk holding {where} is full; free some space and send the message again "
            "(nothing was lost; service resumes by itself)"
        )
    if kind is StoreCorrupt and dialect == "sqlite":
        return (
            f"{where} is damaged, so writing to it is stopped. Stop hermes, keep a copy of the "
            "file and recover it into a new one: sqlite3 state.db .recover | sqlite3 "
            "recovered.db, then put recovered.db in its place (`hermes doctor --deep` checks "
            "the whole file)"
        )
    if kind is StoreCorrupt:
        return (
            f"{where} reports damaged data, so writing to it is stopped; see PostgreSQL's "
            "guidance on corruption (restore from a backup, or REINDEX for a damaged index)"
        )
    if kind is StoreUnavailable:
        return f"{where} is not available right now; try again in a moment"
    return ""


def explain_failure(cause: BaseException, where: str, dialect: str) -> tuple[type[StoreError], str]:
    """The kind of a driver failure and the sentence for the user (empty: none better than
    the driver's own text)."""
    kind = classify_failure(cause)
    name = str(getattr(cause, "sqlite_errorname", "") or "")
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
        return StoreError, (
            f"cannot open {where} for writing; check that the file and its folder exist and "
            "are writable by this user (HERMES_HOME or state.url choose where it lives)"
        )
    return kind, describe_failure(kind, where, dialect)
