"""The store's role Protocols, and `SessionStore`, the composition root that holds one of each.

`state.store.SqlSessionStore` implements them on SQLite and PostgreSQL. A part of the program
holds the role it uses: `SessionCatalog` (sessions, chat routes, lineage heads), `Transcript`
(messages; compaction soft-archives), `InstructionLedger`, `SessionSearch`, `SessionLocks`,
`MetaStore` (counters, meta record), `MemoryStore`; `AgentStore` is the roles an agent holds.
`SessionView` is the store as one reader may see it (only the sessions of the owner its
`ReadScope` names): what tools and chat commands hold instead of the store. Every method is one transaction; messages are stamped with
`_id`/`_persisted` only after their write commits. Every write to a session's messages or
counters moves its `version` by exactly one (meta writes do not), so an agent that counts its
own writes knows when another worker wrote.

Several workers share one store: a session's turns are serialised across processes by
`lock_session` (held for the turn), and a poller runs where `lead` was granted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, TypeAlias

from state.owners import LOCAL_OWNER
from state.values import (
    ArchivedRow,
    ChatMessage,
    Instruction,
    InstructionKind,
    MemoryEntry,
    MemoryHit,
    MemoryKind,
    MemoryOrigin,
    ReadScope,
    SearchHit,
    SessionInfo,
    Usage,
)

__all__ = [
    "AgentStore",
    "ArchiveReason",
    "CompactionKind",
    "ExportFormat",
    "InstructionLedger",
    "Lease",
    "MemoryStore",
    "MetaStore",
    "OnWait",
    "SessionCatalog",
    "SessionLocks",
    "SessionSearch",
    "SessionStore",
    "SessionView",
    "Transcript",
]

CompactionKind: TypeAlias = Literal["batch", "micro", "native"]
ArchiveReason: TypeAlias = Literal["compaction", "retry", "undo", "uncompact"]
"""Why a row left the active set (`messages.archived_by`): a compaction set it aside (or a
rewrite of the head replaced it: the ledger's, memory's), `/retry` or `/undo` took its exchange
back, or `/uncompact` set a summary aside."""
ExportFormat: TypeAlias = Literal["jsonl", "md"]
OnWait: TypeAlias = Callable[[], Awaitable[None]]
"""Called once when a lock is not free at once (the gateway tells the user "busy, queued")."""


class Lease(Protocol):
    """A held cross-process lock (a session's turn, a poller's leadership)."""

    @property
    def name(self) -> str: ...

    @property
    def waited(self) -> bool:
        """It was not free at once: another holder had it."""
        ...

    def is_lost(self) -> bool:
        """The lock is known gone (its connection died, or its lease was taken over)."""
        ...

    async def wait_lost(self) -> None:
        """Return once the lock is known gone."""
        ...


class SessionView(Protocol):
    """The reads a tool or command may make on someone's behalf."""

    @property
    def scope(self) -> ReadScope: ...

    async def get_session(self, session_id: str) -> SessionInfo | None:
        """The session, or None when it does not exist or is not the reader's."""
        ...

    async def list_sessions(
        self, *, limit: int = 50, platform: str | None = None
    ) -> list[SessionInfo]:
        """The reader's newest sessions."""
        ...

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        role: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 20,
        superseded_summaries: bool = True,
    ) -> list[SearchHit]:
        """Ranked hits in the reader's sessions only."""
        ...

    async def read_rows(
        self,
        session_id: str,
        *,
        ids: Sequence[int] | None = None,
        first_id: int | None = None,
        last_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
        include_summaries: bool = False,
    ) -> list[ArchivedRow]:
        """A session's rows (see `SessionSearch.read_rows`); none of another owner's session."""
        ...


class SessionCatalog(Protocol):
    """The sessions: created, found, listed, named, deleted; which session a chat is on;
    stateless HTTP conversations' heads (`state.catalog`)."""

    async def create_session(
        self,
        *,
        platform: str = "cli",
        chat_key: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        parent_session_id: str | None = None,
        owner: str = LOCAL_OWNER,
    ) -> SessionInfo:
        """A new session belonging to `owner` (default: the machine's owner)."""
        ...

    async def get_session(self, session_id: str) -> SessionInfo | None: ...

    async def list_sessions(
        self, *, limit: int = 50, platform: str | None = None, owner: str | None = None
    ) -> list[SessionInfo]:
        """The newest sessions (of `platform`, of `owner`; None: any)."""
        ...

    async def delete_session(self, session_id: str) -> bool:
        """Remove a session and all it holds; only for scratch sessions that must leave no trace."""
        ...

    async def get_or_create_for_chat(
        self,
        platform: str,
        chat_key: str,
        *,
        user_id: str | None = None,
        model: str | None = None,
        owner: str | None = None,
    ) -> SessionInfo:
        """The chat's current session; a new one (belonging to `owner`) when it has none, it
        has ended, or it belongs to another owner."""
        ...

    async def start_new_for_chat(
        self,
        platform: str,
        chat_key: str,
        *,
        user_id: str | None = None,
        model: str | None = None,
        leaving: str | None = None,
        owner: str | None = None,
    ) -> SessionInfo:
        """`/new`: end the session the chat leaves (default: its routed one) and route the chat
        to a fresh one."""
        ...

    async def resume_for_chat(
        self,
        platform: str,
        chat_key: str,
        session_id: str,
        *,
        leaving: str | None = None,
        owner: str | None = None,
    ) -> SessionInfo:
        """`/resume`: route the chat to `session_id` (re-opened if a chat had left it) and end
        the session it leaves; with `owner`, another owner's session is "no session"."""
        ...

    async def set_title(
        self, session_id: str, title: str, *, owner: str | None = None
    ) -> SessionInfo:
        """Name a session; returns it renamed (with `owner`: only that owner's)."""
        ...

    async def take_lineage(self, head: str, claim: str, *, owner: str | None = None) -> str | None:
        """The open session (of `owner`, when given) whose stateless-conversation head is
        `head`, atomically re-headed to `claim`; None when none has it or another request
        took it first."""
        ...

    async def set_lineage(self, session_id: str, head: str | None) -> None:
        """Set (None: clear) the head a stateless request must extend to continue the session."""
        ...

    async def stats(self) -> dict[str, Any]:
        """Counts and totals over the whole store (`hermes sessions stats`)."""
        ...


class Transcript(Protocol):
    """A session's messages: appended, loaded, shown; compaction soft-archives rows (never
    deletes them) and `restore_active` brings them back (`state.transcript`)."""

    async def append(
        self, session_id: str, messages: Sequence[ChatMessage], *, usage: Usage | None = None
    ) -> int:
        """Insert the messages not yet persisted, in order; `usage` joins the same write."""
        ...

    async def load_active(self, session_id: str) -> list[ChatMessage]:
        """The active transcript in order: what a resume sends to the model."""
        ...

    async def show(
        self, session_id: str, *, include_archived: bool = False
    ) -> list[ChatMessage]: ...

    async def archive_and_compact(
        self,
        session_id: str,
        new_active: list[ChatMessage],
        *,
        expected_version: int | None = None,
        kind: CompactionKind | None = None,
        archived_by: ArchiveReason | None = None,
    ) -> None:
        """Make `new_active` the active set in one transaction; archive what it replaces.
        `kind` counts the compaction in that same transaction; `archived_by` is why the
        replaced rows left (default "compaction")."""
        ...

    async def rotate(self, session_id: str, new_active: list[ChatMessage]) -> SessionInfo:
        """Legacy rotating compaction: `new_active` starts a child session."""
        ...

    async def restore_active(
        self, session_id: str, ordered_ids: Sequence[int], *, expected_version: int | None
    ) -> int:
        """Make exactly these rows (archived or not) the active set, in this order, in one
        transaction (undoing a compaction); returns how many rows it archived."""
        ...

    async def export(self, session_id: str, fmt: ExportFormat) -> str:
        """Every row of the session, archived included, as JSON Lines or Markdown."""
        ...


class InstructionLedger(Protocol):
    """A session's standing instructions, kept as rows that are retired, never deleted
    (`state.instructions`)."""

    async def list_instructions(
        self, session_id: str, *, include_inactive: bool = False
    ) -> list[Instruction]:
        """The standing-instructions ledger, oldest first."""
        ...

    async def add_instruction(
        self,
        session_id: str,
        text: str,
        *,
        kind: InstructionKind,
        source_message_id: int | None = None,
        supersedes_id: int | None = None,
    ) -> Instruction:
        """Add a ledger entry, retiring the one it supersedes in the same transaction."""
        ...

    async def remove_instruction(self, session_id: str, instruction_id: int) -> bool:
        """Retire an active ledger entry; False when there is none with that id."""
        ...


class SessionSearch(Protocol):
    """Finding messages again, archived ones included (`state.rows`); `owner` filters in the
    query. Tools and commands read through a `SessionView` instead."""

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        platform: str | None = None,
        role: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 20,
        superseded_summaries: bool = True,
        owner: str | None = None,
    ) -> list[SearchHit]:
        """Ranked hits; `owner` filters in the query (None: every owner's)."""
        ...

    async def read_rows(
        self,
        session_id: str,
        *,
        ids: Sequence[int] | None = None,
        first_id: int | None = None,
        last_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
        include_summaries: bool = False,
        owner: str | None = None,
    ) -> list[ArchivedRow]:
        """The session's rows (archived included) in id order: the given ids, or an id range,
        paged; superseded summary markers only with `include_summaries`; none when `owner`
        is given and the session is not theirs."""
        ...


class SessionLocks(Protocol):
    """Cross-process locks: a session's turn, a poller's leadership (`state.locks`)."""

    def lock_session(
        self, session_id: str, *, timeout_s: float, on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[Lease]:
        """Hold the session's turn lock across processes for the `async with` body.

        Waits at most `timeout_s` (0: only if free now), then raises `SessionBusy`; released on
        every exit path, and by the database when the holder dies."""
        ...

    def lead(
        self, role: str, *, on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[Lease]:
        """Wait (until cancelled) to be the one process holding `role` (e.g. "telegram");
        `on_wait` runs once when another process leads."""
        ...


class MetaStore(Protocol):
    """A session's counters and meta record (`state.meta`); the agent reads the record through
    `agent.session_meta`."""

    async def record_usage(self, session_id: str, usage: Usage) -> None: ...

    async def record_compaction(self, session_id: str, *, kind: CompactionKind) -> None: ...

    async def get_meta(self, session_id: str) -> dict[str, Any]:
        """The session's raw meta record; read it through `agent.session_meta`."""
        ...

    async def update_meta(self, session_id: str, **changes: Any) -> None:
        """Merge `changes` into the meta record (None removes a key)."""
        ...


class AgentStore(Protocol):
    """The roles a session's agent and its end-of-turn work hold (`agent.deps.AgentDeps.store`):
    its session row, its messages, its ledger, its meta record, and archived rows read back
    (`/bringback`). Not the locks (the runner holds the turn), memory (`AgentDeps.memory`), or
    the views (tools get theirs through `ToolContext`)."""

    @property
    def sessions(self) -> SessionCatalog: ...

    @property
    def transcript(self) -> Transcript: ...

    @property
    def ledger(self) -> InstructionLedger: ...

    @property
    def search(self) -> SessionSearch: ...

    @property
    def meta(self) -> MetaStore: ...


class SessionStore(AgentStore, Protocol):
    """The whole store as the runtime opens it: one object per role, over one database (the
    agent's roles, plus the locks and memory).

    Hand a part of the program the role it uses (`store.transcript`, `store.sessions`, ...),
    not the store; tools and chat commands get a `SessionView` (`view`)."""

    @property
    def locks(self) -> SessionLocks: ...

    @property
    def memory(self) -> MemoryStore: ...

    def disk_free_bytes(self) -> int | None:
        """Free bytes where the database file lives; None for a server database."""
        ...

    def view(self, scope: ReadScope) -> SessionView:
        """The store as a reader with `scope` may see it (`state.views.OwnedSessionView`)."""
        ...

    async def aclose(self) -> None: ...


class MemoryStore(Protocol):
    """What Hermes remembers about each person (`state.memory`). Every call names the owner
    (`Principal.owner`) and touches only that owner's entries; nothing here lists owners."""

    async def add_memory(
        self,
        owner: str,
        text: str,
        *,
        kind: MemoryKind,
        origin: MemoryOrigin,
        source_session_id: str | None = None,
        first_row_id: int | None = None,
        last_row_id: int | None = None,
        supersedes: int | None = None,
    ) -> MemoryEntry:
        """Remember `text` (an identical current entry is returned instead); `supersedes`
        corrects one current entry of the owner in the same transaction."""
        ...

    async def list_memory(
        self,
        owner: str,
        *,
        kind: MemoryKind | None = None,
        include_history: bool = False,
        limit: int = 1_000,
    ) -> list[MemoryEntry]:
        """Current entries, oldest first (corrected and forgotten ones with `include_history`)."""
        ...

    async def get_memory(self, owner: str, entry_id: int) -> MemoryEntry | None: ...

    async def forget_memory(self, owner: str, entry_id: int) -> MemoryEntry | None:
        """Erase one entry's text and drop it from search; returns it as it was."""
        ...

    async def set_memory_vector(
        self, owner: str, entry_id: int, *, model: str, vector: Sequence[float]
    ) -> bool:
        """Keep one current entry's vector (made by `model`); False when there is none."""
        ...

    async def search_memory(
        self,
        owner: str,
        query: str,
        *,
        kind: MemoryKind | None = None,
        limit: int = 10,
        vector: Sequence[float] | None = None,
        model: str | None = None,
    ) -> list[MemoryHit]:
        """Current entries matching `query`, best first; hybrid with the query's `vector`."""
        ...
