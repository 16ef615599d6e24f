"""The session store: everything ever said, kept; compaction only changes what is active."""

from __future__ import annotations

from state.engine import default_url
from state.records import SearchHit, SessionInfo
from state.store import SessionStore

__all__ = ["SearchHit", "SessionInfo", "SessionStore", "default_url"]
