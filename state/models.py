"""SQLAlchemy models of the session store: one model set for SQLite and PostgreSQL, plus search DDL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    event,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.schema import DDL
from sqlalchemy.types import TypeDecorator, TypeEngine

from state.owners import LOCAL_OWNER
from state.values import MAX_ID_CHARS

__all__ = [
    "SEARCH_DDL_POSTGRESQL",
    "SEARCH_DDL_SQLITE",
    "CHAT_ROUTES",
    "INSTRUCTIONS",
    "LEASES",
    "LINEAGE_HEAD_CHARS",
    "MEDIA",
    "MEMORY",
    "MEMORY_SEARCH_DDL_POSTGRESQL",
    "MEMORY_SEARCH_DDL_SQLITE",
    "MESSAGES",
    "SCHEMA_VERSION_TABLE",
    "SESSIONS",
    "Base",
    "ChatRouteRow",
    "InstructionRow",
    "JOBS",
    "JobRow",
    "LeaseRow",
    "MediaRow",
    "MemoryRow",
    "MessageRow",
    "SchemaVersionRow",
    "SessionRow",
]

LINEAGE_HEAD_CHARS = 80
"""A sha256 hex digest, or a claim marker while a turn continues the session."""
BigId = BigInteger().with_variant(Integer, "sqlite")
"""SQLite only auto-increments an `INTEGER PRIMARY KEY`."""


class Json(TypeDecorator[Any]):
    """JSON, JSONB on PostgreSQL; Python None is SQL NULL (not the JSON text `null`).

    The PostgreSQL type is chosen when a PostgreSQL engine first compiles it, so a SQLite store
    (every `hermes chat -q`) never imports the PostgreSQL dialect."""

    impl = JSON(none_as_null=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(JSON(none_as_null=True))


class Base(DeclarativeBase):
    pass


class SchemaVersionRow(Base):
    """One row: the schema version this database is at."""

    __tablename__ = "schema_version"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)


class SessionRow(Base):
    __tablename__ = "sessions"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    platform: Mapped[str] = mapped_column(String(32), nullable=False)
    chat_key: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    user_id: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    title: Mapped[str | None] = mapped_column(String(500))
    model: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)
    parent_session_id: Mapped[str | None] = mapped_column(
        String(36), ForeignKey("sessions.id", ondelete="SET NULL")
    )
    end_reason: Mapped[str | None] = mapped_column(String(32))
    input_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    last_prompt_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    compactions: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    micro_compactions: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    native_compactions: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    active_messages: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    total_messages: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    next_position: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """Bumped by every write to the session's messages or counters, one step per write (an
    agent counts its own); meta writes do not move it (meta is read fresh where it matters)."""
    meta: Mapped[dict[str, Any]] = mapped_column(Json, nullable=False, default=dict)
    lineage_head: Mapped[str | None] = mapped_column(String(LINEAGE_HEAD_CHARS))
    """Schema v6: the hash of the history a stateless HTTP client will resend to continue this
    session (`gateway.http.lineage`); NULL for every other session."""
    owner: Mapped[str] = mapped_column(String(MAX_ID_CHARS), nullable=False, default=LOCAL_OWNER)
    """Schema v7: who the session belongs to (`state.owners`): `telegram:111`, `http:alice`,
    `telegram:chat:-100` for a group; every read on someone's behalf filters by it."""

    __table_args__ = (
        Index("ix_sessions_platform_updated", "platform", "updated_at"),
        Index("ix_sessions_lineage_head", "lineage_head"),
        Index("ix_sessions_owner_updated", "owner", "updated_at"),
    )


class ChatRouteRow(Base):
    """Which session a platform chat currently talks to."""

    __tablename__ = "chat_routes"
    platform: Mapped[str] = mapped_column(String(32), primary_key=True)
    chat_key: Mapped[str] = mapped_column(String(MAX_ID_CHARS), primary_key=True)
    session_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, index=True
    )
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)


class MessageRow(Base):
    __tablename__ = "messages"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False
    )
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    content: Mapped[str | None] = mapped_column(Text)
    """The text (blocks joined): what search indexes."""
    blocks: Mapped[list[dict[str, Any]] | None] = mapped_column(Json)
    """The content blocks when the content was a list, else NULL."""
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(Json)
    tool_call_id: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    name: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    extra: Mapped[dict[str, Any] | None] = mapped_column(Json)
    """Any other non-metadata keys the message carried, kept verbatim."""
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    compacted: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    """Archived by a compaction (`archived_by` says so, and names the other reasons)."""
    archived_by: Mapped[str | None] = mapped_column(String(16))
    """Why an archived row left the active set (`state.contract.ArchiveReason`); NULL while
    active. Rows archived before schema v11 say "compaction", as their flag did."""
    kind: Mapped[str] = mapped_column(String(16), nullable=False, default="normal")
    token_estimate: Mapped[int] = mapped_column(Integer, nullable=False, default=0)

    # Active rows are always the top positions of their session, so (session_id, position)
    # serves loads; `active` is deliberately in no index, so archiving rewrites no index entry
    # (PostgreSQL: HOT updates, helped by the free space fillfactor 50 leaves in each page).
    __table_args__ = (Index("ux_messages_session_position", "session_id", "position", unique=True),)


class LeaseRow(Base):
    """A named lock with an expiry: SQLite's cross-process session locks and poller elections
    (PostgreSQL uses advisory locks instead, which die with their connection)."""

    __tablename__ = "leases"
    name: Mapped[str] = mapped_column(String(300), primary_key=True)
    """`session:<id>` or `leader:<role>`."""
    holder: Mapped[str] = mapped_column(String(120), nullable=False)
    """Unique per acquisition (host, pid, random), so a late release never frees a successor."""
    expires_at: Mapped[float] = mapped_column(Float, nullable=False)
    """Epoch seconds; the holder renews it, a crashed holder's lease is free once it passes."""


class InstructionRow(Base):
    """One standing instruction of a session's ledger (schema v4): verbatim, never summarized."""

    __tablename__ = "instructions"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False, index=True
    )
    text: Mapped[str] = mapped_column(Text, nullable=False)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    """detected | pin"""
    source_message_id: Mapped[int | None] = mapped_column(BigInteger)
    """The message row it was found in; NULL for `/pin`."""
    supersedes_id: Mapped[int | None] = mapped_column(BigInteger)
    """The entry (of the same session) this one replaced."""
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="active")
    """active | superseded | removed: entries are never deleted, only retired."""
    created_at: Mapped[float] = mapped_column(Float, nullable=False)


class JobRow(Base):
    """A scheduled job, reminder or heartbeat (schema v8): what runs when, for whom, where to,
    and who is running it now (the claim)."""

    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(MAX_ID_CHARS), nullable=False, index=True)
    """`Principal.owner` of whoever made it: only they see, change or get its output."""
    kind: Mapped[str] = mapped_column(String(16), nullable=False, default="job")
    """job | reminder | heartbeat"""
    target_kind: Mapped[str] = mapped_column(String(16), nullable=False)
    """chat (a platform chat) | session (an existing session) | fresh (a new session per run)"""
    target_platform: Mapped[str | None] = mapped_column(String(32))
    target_chat: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    """The platform's chat id (where the adapter sends)."""
    target_thread: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    target_key: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    """The chat's routing key (`telegram:dm:42`): which session the chat is on."""
    target_session: Mapped[str | None] = mapped_column(String(36))
    schedule: Mapped[str] = mapped_column(String(300), nullable=False)
    """`once:<epoch>` | `every:<seconds>` | `cron:<5 fields>`"""
    timezone: Mapped[str] = mapped_column(String(64), nullable=False, default="UTC")
    prompt: Mapped[str] = mapped_column(Text, nullable=False)
    model: Mapped[str | None] = mapped_column(String(255))
    quiet_hours: Mapped[str | None] = mapped_column(String(16))
    catch_up: Mapped[str] = mapped_column(String(8), nullable=False, default="once")
    paused: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    next_run_at: Mapped[float | None] = mapped_column(Float)
    """NULL once a one-shot is done (or a job gave up): it never fires again."""
    last_run_at: Mapped[float | None] = mapped_column(Float)
    last_outcome: Mapped[str | None] = mapped_column(String(16))
    """ok | silent | failed | skipped | missed"""
    last_error: Mapped[str | None] = mapped_column(Text)
    failures: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """Failed tries of the current run, in a row (backoff and giving up count these)."""
    runs: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    claimed_by: Mapped[str | None] = mapped_column(String(120))
    """The worker running it now; with `claimed_until` in the past, nobody."""
    claimed_until: Mapped[float | None] = mapped_column(Float)
    claim_due: Mapped[float | None] = mapped_column(Float)
    """The run (its due time) the claim is for."""
    claim_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    """Claims of that run: 2 means a worker died running it and another took over."""
    delivered_due: Mapped[float | None] = mapped_column(Float)
    """The run whose result was delivered; written before the send, so a redo never resends."""

    __table_args__ = (Index("ix_jobs_due", "paused", "next_run_at"),)


class MediaRow(Base):
    """Schema v10: one stored file as one owner has it. The bytes live once, under
    HERMES_HOME/media/ by sha256; two owners of the same bytes have a row each, and a lookup
    is always by (owner, sha256), so nobody reaches a file by its hash alone."""

    __tablename__ = "media"
    owner: Mapped[str] = mapped_column(String(MAX_ID_CHARS), primary_key=True)
    """`Principal.owner` of whoever sent the file (`telegram:111`, `http:alice`)."""
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    """image | audio | pdf | text | other: sniffed from the bytes."""
    mime: Mapped[str] = mapped_column(String(100), nullable=False)
    size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str | None] = mapped_column(String(255))
    """The file name the sender gave (shown, never trusted)."""
    created_at: Mapped[float] = mapped_column(Float, nullable=False)

    __table_args__ = (Index("ix_media_sha256", "sha256"),)


class MemoryRow(Base):
    """One thing remembered about a person (schema v9): a profile entry or a note.

    Rows are never deleted: a correction points the old row at its successor (`superseded_by`),
    and forgetting erases the text and sets `deleted`. Every read filters by `owner`."""

    __tablename__ = "memory"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(MAX_ID_CHARS), nullable=False)
    """`Principal.owner` of the person: `terminal:local`, `http:alice`, `telegram:111`."""
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    """profile | note"""
    text: Mapped[str] = mapped_column(Text, nullable=False)
    origin: Mapped[str] = mapped_column(String(16), nullable=False)
    """tool | compaction | ledger | user"""
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    source_session_id: Mapped[str | None] = mapped_column(String(36))
    """No foreign key: what a person told survives the session it was told in."""
    first_row_id: Mapped[int | None] = mapped_column(BigInteger)
    last_row_id: Mapped[int | None] = mapped_column(BigInteger)
    superseded_by: Mapped[int | None] = mapped_column(BigInteger)
    deleted: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary)
    """The text's vector (normalized little-endian float32) when `memory.embeddings` is set."""
    embedding_model: Mapped[str | None] = mapped_column(String(255))
    """The model that made `embedding`; vectors of another model are never compared."""

    __table_args__ = (Index("ix_memory_owner_kind", "owner", "kind", "id"),)


SEARCH_DDL_SQLITE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5("
    "content, content='messages', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS messages_fts_ai AFTER INSERT ON messages BEGIN "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER IF NOT EXISTS messages_fts_ad AFTER DELETE ON messages BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) "
    "VALUES ('delete', old.id, old.content); END",
    # Only a content change touches the index: archiving and renumbering rows stay cheap.
    "CREATE TRIGGER IF NOT EXISTS messages_fts_au AFTER UPDATE OF content ON messages BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) "
    "VALUES ('delete', old.id, old.content); "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END",
)
SEARCH_DDL_POSTGRESQL = (
    "ALTER TABLE messages ADD COLUMN IF NOT EXISTS tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, coalesce(content, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS ix_messages_tsv ON messages USING gin (tsv)",
)

MEMORY_SEARCH_DDL_SQLITE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5("
    "text, content='memory', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS memory_fts_ai AFTER INSERT ON memory BEGIN "
    "INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS memory_fts_ad AFTER DELETE ON memory BEGIN "
    "INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER IF NOT EXISTS memory_fts_au AFTER UPDATE OF text ON memory BEGIN "
    "INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text); END",
)
MEMORY_SEARCH_DDL_POSTGRESQL = (
    "ALTER TABLE memory ADD COLUMN IF NOT EXISTS tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, coalesce(text, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS ix_memory_tsv ON memory USING gin (tsv)",
)

# The Core handles of the tables: `Model.__table__` is typed as a FromClause, these as Tables.
SESSIONS = cast(Table, SessionRow.__table__)
MESSAGES = cast(Table, MessageRow.__table__)
CHAT_ROUTES = cast(Table, ChatRouteRow.__table__)
LEASES = cast(Table, LeaseRow.__table__)
INSTRUCTIONS = cast(Table, InstructionRow.__table__)
JOBS = cast(Table, JobRow.__table__)


MEDIA = cast(Table, MediaRow.__table__)
MEMORY = cast(Table, MemoryRow.__table__)
SCHEMA_VERSION_TABLE = cast(Table, SchemaVersionRow.__table__)

# SQLAlchemy 2.1 ships `DDL.__init__` without annotations; the calls are typed by hand here.
_make_ddl = cast("Callable[[str], DDL]", DDL)
for _stmt in SEARCH_DDL_SQLITE:
    event.listen(MESSAGES, "after_create", _make_ddl(_stmt).execute_if(dialect="sqlite"))
# fillfactor 50 as DDL, not `postgresql_with` in the table's arguments: a dialect keyword there
# makes SQLAlchemy import the PostgreSQL dialect for every store, SQLite included.
for _stmt in ("ALTER TABLE messages SET (fillfactor = 50)", *SEARCH_DDL_POSTGRESQL):
    event.listen(MESSAGES, "after_create", _make_ddl(_stmt).execute_if(dialect="postgresql"))
for _stmt in MEMORY_SEARCH_DDL_SQLITE:
    event.listen(MEMORY, "after_create", _make_ddl(_stmt).execute_if(dialect="sqlite"))
for _stmt in MEMORY_SEARCH_DDL_POSTGRESQL:
    event.listen(MEMORY, "after_create", _make_ddl(_stmt).execute_if(dialect="postgresql"))
