"""One person's memory over the store: every call names this owner; text is redacted first.

Tools, commands and the CLI never hold the raw `MemoryStore`: they get an `OwnerMemory` bound to
the principal whose turn (or terminal) it is. The profile's cap is enforced here.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from agent.errors import HermesError, StoreError
from agent.memory.block import profile_tokens, render_memory
from agent.memory.embeddings import Embedder, EmbeddingsUnavailable
from agent.redaction import REDACTED, redact_text
from state.contract import MemoryStore
from state.values import MAX_MEMORY_CHARS, MemoryEntry, MemoryHit, MemoryKind, MemoryOrigin

__all__ = ["MemoryBackend", "MemoryRefused", "OwnerMemory", "Source"]

log = structlog.get_logger(__name__)


class MemoryRefused(HermesError):
    """Nothing was stored or changed; the message says why, in one sentence for the person."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBackend:
    """What memory runs on: the store, and the embeddings endpoint when one is configured."""

    store: MemoryStore
    embedder: Embedder | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """Where something was learned: a session and the anchor of its rows."""

    session_id: str | None = None
    first_row_id: int | None = None
    last_row_id: int | None = None


class OwnerMemory:
    """The memory of `owner` (`Principal.owner`)."""

    def __init__(
        self,
        store: MemoryStore,
        owner: str,
        *,
        profile_max_tokens: int,
        embedder: Embedder | None = None,
    ) -> None:
        if not owner:
            raise ValueError("memory needs an owner")
        self._store = store
        self._embedder = embedder
        self.owner = owner
        self.profile_max_tokens = profile_max_tokens

    async def remember(
        self,
        text: str,
        *,
        kind: MemoryKind = "note",
        origin: MemoryOrigin,
        source: Source = Source(),
        supersedes: int | None = None,
    ) -> MemoryEntry:
        """Keep `text` (secrets redacted); a profile entry only while the profile has room.
        Raises MemoryRefused for text that is empty or nothing but a secret, a full profile,
        or a `supersedes` that names nothing current of this owner."""
        cleaned = redact_text(" ".join(text.split()))
        if not cleaned.replace(REDACTED, "").strip(" .,:;-"):
            raise MemoryRefused(
                "there is nothing to remember but a secret, and secrets are not kept"
            )
        if len(cleaned) > MAX_MEMORY_CHARS:
            raise MemoryRefused(f"an entry holds at most {MAX_MEMORY_CHARS} characters")
        if supersedes is not None:
            current = await self._store.get_memory(self.owner, supersedes)
            if current is None or not current.is_current:
                raise MemoryRefused(f"nothing current is remembered as m{supersedes}")
            kind = current.kind  # a correction stays what it corrects
        if kind == "profile":
            await self._check_room(cleaned, replacing=supersedes)
        entry = await self._store.add_memory(
            self.owner,
            cleaned,
            kind=kind,
            origin=origin,
            source_session_id=source.session_id,
            first_row_id=source.first_row_id,
            last_row_id=source.last_row_id,
            supersedes=supersedes,
        )
        await self._keep_vector(entry)
        return entry

    async def forget(self, entry_id: int) -> MemoryEntry | None:
        """Erase one entry; None when this owner has no such entry."""
        return await self._store.forget_memory(self.owner, entry_id)

    async def get(self, entry_id: int) -> MemoryEntry | None:
        return await self._store.get_memory(self.owner, entry_id)

    async def search(self, query: str, *, limit: int = 8) -> list[MemoryHit]:
        """Full text, and vectors too when an embeddings endpoint is configured and answers."""
        return await self._search(query, kind=None, limit=limit)

    async def entries(self, *, include_history: bool = False) -> list[MemoryEntry]:
        """Everything remembered: the profile first, then the notes, each oldest first."""
        found = await self._store.list_memory(self.owner, include_history=include_history)
        return [e for e in found if e.kind == "profile"] + [e for e in found if e.kind == "note"]

    async def block(self, about: str, *, notes: int) -> str:
        """The system message's memory block: the whole profile, and up to `notes` notes
        matching `about` (a first message, the newest request)."""
        profile = await self._store.list_memory(self.owner, kind="profile")
        found: list[MemoryEntry] = []
        if notes > 0 and about.strip():
            hits = await self._search(about, kind="note", limit=notes)
            found = [h.entry for h in hits]
        return render_memory(profile, found)

    async def _check_room(self, text: str, *, replacing: int | None) -> None:
        profile = await self._store.list_memory(self.owner, kind="profile")
        texts = [e.text for e in profile if e.id != replacing] + [text]
        if profile_tokens(texts) > self.profile_max_tokens:
            raise MemoryRefused(
                f"the profile is full ({self.profile_max_tokens} tokens); correct or forget an "
                "entry first, or keep this as a note"
            )

    async def _search(self, query: str, *, kind: MemoryKind | None, limit: int) -> list[MemoryHit]:
        vector = await self._vector(query)
        model = self._embedder.model if self._embedder is not None else None
        return await self._store.search_memory(
            self.owner, query, kind=kind, limit=limit, vector=vector, model=model
        )

    async def _vector(self, text: str) -> list[float] | None:
        if self._embedder is None or not text.strip():
            return None
        try:
            return (await self._embedder.embed([text]))[0]
        except EmbeddingsUnavailable:
            return None  # full text alone; the failure is logged where it happened

    async def _keep_vector(self, entry: MemoryEntry) -> None:
        """The new entry's vector, when embeddings are configured; a failure loses only the
        vector (the entry is found by full text)."""
        if self._embedder is None:
            return
        vector = await self._vector(entry.text)
        if vector is None:
            return
        try:
            await self._store.set_memory_vector(
                self.owner, entry.id, model=self._embedder.model, vector=vector
            )
        except StoreError as exc:
            log.warning("memory_vector_not_stored", error_type=type(exc).__name__)
