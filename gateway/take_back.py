"""`/retry` and `/undo`: take the last exchange out of the conversation, never out of the store.

Both archive the last exchange (the newest message the user typed and everything after it) with
the store's soft-archive transaction (`Transcript.archive_and_compact`, counted as no
compaction): the rows become `active=0` with `archived_by` "retry" or "undo" (never taken for a
compaction's, so `/uncompact` leaves them aside), stay searchable and are listed, with that
reason, by `hermes sessions show --all`. A
crash mid-way leaves the session before or after, never between. `/retry` then answers the same
words again as a new turn; `/undo` stops there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent.errors import ConcurrentModification
from agent.messages import ChatMessage, content_text, is_real_user_message

if TYPE_CHECKING:
    from agent.agent import AIAgent

__all__ = ["TakenBack", "last_exchange_start", "take_back"]

NOTHING_TO_RETRY = "Nothing to retry yet: send a message first."
NOTHING_TO_UNDO = "Nothing to undo: there is no exchange in this session yet."
MOVED_ON = (
    "The conversation changed meanwhile (another device?); nothing was taken back. Try again."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TakenBack:
    """What `/retry` or `/undo` did: the answer to show, and the words to answer again."""

    reply: str
    rerun: str | None = None
    """`/retry`: the user's last words, to be answered as a new turn; None: nothing to run."""
    archived: int = 0


def last_exchange_start(transcript: list[ChatMessage]) -> int | None:
    """Pure: the index of the newest message the user typed (summary markers do not count)."""
    for index in range(len(transcript) - 1, -1, -1):
        if is_real_user_message(transcript[index]):
            return index
    return None


async def take_back(agent: AIAgent, what: Literal["retry", "undo"]) -> TakenBack:
    """Archive the last exchange of `agent`'s session in one store transaction (hold the
    session's lock); for "retry", hand back the words to answer again."""
    await agent.persist()
    start = last_exchange_start(agent.transcript)
    if start is None:
        return TakenBack(reply=NOTHING_TO_RETRY if what == "retry" else NOTHING_TO_UNDO)
    said = content_text(agent.transcript[start])
    kept = agent.transcript[:start]
    archived = len(agent.transcript) - start
    try:
        await agent.store.transcript.archive_and_compact(
            agent.session_id, kept, expected_version=agent.known_version, archived_by=what
        )
    except ConcurrentModification:
        await agent.sync_with_store()  # the stored set, as it is now
        return TakenBack(reply=MOVED_ON)
    await agent.sync_with_store()  # the set just stored (its rows, renumbered)
    if what == "retry":
        return TakenBack(reply="", rerun=said, archived=archived)
    preview = said if len(said) <= 60 else said[:57] + "…"
    return TakenBack(
        reply=f"↩️ Undone: “{preview}” and its answer ({archived} messages) are set aside, "
        "not deleted (hermes sessions show --all lists them).",
        archived=archived,
    )
