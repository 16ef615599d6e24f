"""The root of the runtime's error tree and the store's own errors.

They sit at the bottom because the store raises them; `agent.errors` draws the whole tree and
re-exports these, so callers import every error from there.
"""

from __future__ import annotations

__all__ = [
    "ConcurrentModification",
    "HermesError",
    "InvalidRecord",
    "SessionBusy",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreUnavailable",
]


class HermesError(Exception):
    """Root of every error the runtime raises on purpose."""


class StoreError(HermesError):
    """The session store failed; nothing was half-written."""


class InvalidRecord(StoreError, ValueError):
    """A value the store cannot keep (too long for its column); nothing was written. The
    caller's input is at fault: refuse it (HTTP 400), do not retry."""

    def __init__(self, field: str, *, limit: int, got: int) -> None:
        super().__init__(f"{field} is too long: {got} characters, at most {limit}")
        self.field = field
        self.limit = limit


class StoreUnavailable(StoreError):
    """The database cannot serve now (unreachable, overloaded, out of space); nothing was
    written. Worth retrying later (HTTP 503 with Retry-After)."""

    retry_after_s: float = 5.0


class StoreFull(StoreUnavailable):
    """The disk under the database is full; service resumes by itself once space is freed."""

    retry_after_s = 30.0


class StoreCorrupt(StoreError):
    """The database file is damaged. Writing on is refused: it could spread the damage."""


class ConcurrentModification(StoreError):
    """Another writer changed the session between our read and our write."""


class SessionBusy(StoreError):
    """Another worker (or task) held the lock within the time we could wait for it."""

    def __init__(self, name: str, *, waited_s: float) -> None:
        super().__init__(f"{name} is busy elsewhere (waited {waited_s:.1f} s)")
        self.name = name
        self.waited_s = waited_s
