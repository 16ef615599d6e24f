"""The root of the runtime's error tree and the store's own errors.

They sit at the bottom because the store raises them; `agent.errors` draws the whole tree and
re-exports these, so callers import every error from there.
"""

from __future__ import annotations

__all__ = ["ConcurrentModification", "HermesError", "SessionBusy", "StoreError"]


class HermesError(Exception):
    """Root of every error the runtime raises on purpose."""


class StoreError(HermesError):
    """The session store failed; nothing was half-written."""


class ConcurrentModification(StoreError):
    """Another writer changed the session between our read and our write."""


class SessionBusy(StoreError):
    """Another worker (or task) held the lock within the time we could wait for it."""

    def __init__(self, name: str, *, waited_s: float) -> None:
        super().__init__(f"{name} is busy elsewhere (waited {waited_s:.1f} s)")
        self.name = name
        self.waited_s = waited_s
