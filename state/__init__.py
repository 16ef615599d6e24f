"""The session store: everything ever said, kept; compaction only changes what is active."""

from __future__ import annotations

__all__: list[str] = []
