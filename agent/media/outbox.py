"""Files a turn sends back to the person: the `send_file` tool puts them here by session, and
the chat's reply sink takes them after the reply's text (`gateway.reply`). Explicit, bounded
state; no I/O."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_QUEUED_FILES", "OutboundFile", "Outbox"]

MAX_QUEUED_FILES = 10
"""Files one session may have waiting; more is refused (a loop must not flood the chat)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboundFile:
    """A file to send: its bytes, the name the person sees, how the platform shows it."""

    name: str
    data: bytes
    kind: Literal["photo", "document"]
    caption: str | None = None


class Outbox:
    """Waiting files by session id."""

    def __init__(self) -> None:
        self._waiting: defaultdict[str, list[OutboundFile]] = defaultdict(list)

    def put(self, session_id: str, file: OutboundFile) -> bool:
        """Queue `file`; False when the session already has `MAX_QUEUED_FILES` waiting."""
        waiting = self._waiting[session_id]
        if len(waiting) >= MAX_QUEUED_FILES:
            return False
        waiting.append(file)
        return True

    def take(self, session_id: str) -> list[OutboundFile]:
        """The session's waiting files, in order; they are no longer waiting."""
        return self._waiting.pop(session_id, [])
