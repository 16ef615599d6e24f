"""One session's use of its person's memory: the block at session start and at compaction,
facts from the compaction summary, and standing instructions offered to the profile.

The agent calls these at exactly the two moments its system message may change without an
extra prompt-cache break: before the first model call of a session, and when a compaction
rebuilds the active set. Memory is bookkeeping: a store failure here is logged and the turn
(or the compaction) goes on without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from agent.config import MemoryConfig
from agent.errors import StoreError
from agent.ledger.session import LedgerChange
from agent.memory.block import apply_memory
from agent.memory.facts import UserFact
from agent.memory.person import is_about_person
from agent.memory.view import MemoryBackend, MemoryRefused, OwnerMemory, Source
from agent.messages import ChatMessage, content_text, is_real_user_message
from state.values import Instruction

__all__ = [
    "SessionMemory",
    "is_session_start",
    "newest_request",
    "renewed_at_compaction",
    "session_memory",
]

if TYPE_CHECKING:
    from agent.context_engine import CompressResult

log = structlog.get_logger(__name__)


def is_session_start(transcript: Sequence[ChatMessage]) -> bool:
    """Nothing but the system prompt yet: the model has never seen this session."""
    return all(m.get("role") == "system" for m in transcript)


def newest_request(messages: Sequence[ChatMessage]) -> str:
    """The newest real user message's text ("" when there is none)."""
    for message in reversed(messages):
        if is_real_user_message(message):
            return content_text(message)
    return ""


class SessionMemory:
    """The memory of the person one session belongs to."""

    def __init__(self, view: OwnerMemory, *, notes_at_start: int) -> None:
        self.view = view
        self._notes = notes_at_start

    @property
    def owner(self) -> str:
        return self.view.owner

    async def opening(
        self, transcript: list[ChatMessage], new: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        """The transcript with the memory block for a session's first message (`new`): the
        same list when there is nothing to show or the store fails."""
        try:
            block = await self.view.block(newest_request(new), notes=self._notes)
        except StoreError as exc:
            log.warning(
                "memory_unavailable", owner_kind=_kind(self.owner), error=type(exc).__name__
            )
            return transcript
        return apply_memory(transcript, block)

    async def at_compaction(
        self, messages: list[ChatMessage], facts: Sequence[UserFact], *, session_id: str
    ) -> list[ChatMessage]:
        """Keep the facts the summary found (before their rows leave the context), then
        rebuild the block from the memory as it is now. On a store failure the block stays
        as it was."""
        try:
            for fact in facts:
                await self._keep(fact, session_id)
            block = await self.view.block(newest_request(messages), notes=self._notes)
        except StoreError as exc:
            log.warning("memory_not_refreshed", error=type(exc).__name__)
            return messages
        if facts:
            log.info("memory_facts_kept", session_id=session_id, facts=len(facts))
        return apply_memory(messages, block)

    async def offer_instructions(self, change: LedgerChange, *, session_id: str) -> None:
        """Standing instructions about the person (not the task) join the profile; one that
        replaced an instruction already in the profile corrects that entry."""
        replaced = change.superseded
        for entry in change.added:
            if not is_about_person(entry.text):
                continue
            source = Source(
                session_id=session_id,
                first_row_id=entry.source_message_id,
                last_row_id=entry.source_message_id,
            )
            try:
                old = await self._profile_entry(replaced, entry.supersedes_id)
                await self.view.remember(
                    entry.text, kind="profile", origin="ledger", source=source, supersedes=old
                )
            except (MemoryRefused, StoreError) as exc:
                log.info("memory_profile_offer_declined", reason=type(exc).__name__)

    async def _profile_entry(
        self, replaced: Sequence[Instruction], instruction_id: int | None
    ) -> int | None:
        """The current profile entry holding the words of the instruction `instruction_id`."""
        words = {" ".join(i.text.casefold().split()) for i in replaced if i.id == instruction_id}
        if not words:
            return None
        for entry in await self.view.entries():
            if entry.kind == "profile" and " ".join(entry.text.casefold().split()) in words:
                return entry.id
        return None

    async def _keep(self, fact: UserFact, session_id: str) -> None:
        anchor = fact.anchor
        source = Source(
            session_id=session_id,
            first_row_id=anchor.first if anchor else None,
            last_row_id=anchor.last if anchor else None,
        )
        try:
            await self.view.remember(fact.text, origin="compaction", source=source)
        except MemoryRefused:
            pass  # only a secret: nothing to keep


def _kind(owner: str) -> str:
    return owner.split(":", 1)[0]


def session_memory(
    backend: MemoryBackend | None, config: MemoryConfig, owner: str | None
) -> SessionMemory | None:
    """The memory a session of `owner` uses; None without a store, an owner, or memory on."""
    if backend is None or not owner or not config.enabled:
        return None
    view = OwnerMemory(
        backend.store,
        owner,
        profile_max_tokens=config.profile_max_tokens,
        embedder=backend.embedder,
    )
    return SessionMemory(view, notes_at_start=config.notes_at_start)


async def renewed_at_compaction(
    memory: SessionMemory | None,
    messages: list[ChatMessage],
    result: CompressResult | None,
    session_id: str,
) -> list[ChatMessage]:
    """A compaction's new active set: the summary's facts about the user kept first, then the
    memory block renewed (the cache breaks here anyway); unchanged without memory."""
    if memory is None:
        return messages
    facts = result.user_facts if result is not None else ()
    return await memory.at_compaction(messages, facts, session_id=session_id)
