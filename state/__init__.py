"""The session store: everything ever said, kept; compaction only changes what is active."""

from __future__ import annotations

from state._connection import OpObserver
from state.contract import (
    AgentStore,
    ArchiveReason,
    CompactionKind,
    ExportFormat,
    InstructionLedger,
    Lease,
    MemoryStore,
    MetaStore,
    SessionCatalog,
    SessionLocks,
    SessionSearch,
    SessionStore,
    SessionView,
    Transcript,
)
from state.engine import default_url
from state.jobs import SqlJobStore
from state.media_store import MediaStore, StoredMedia, sha256_of
from state.owners import DEFAULT_HTTP_OWNER, LOCAL_OWNER, chat_owner, person_owner
from state.store import SqlSessionStore
from state.values import (
    ArchivedRow,
    Instruction,
    JobInfo,
    JobSpec,
    MemoryEntry,
    MemoryHit,
    ReadScope,
    SearchHit,
    SessionInfo,
)
from state.views import OwnedSessionView

__all__ = [
    "DEFAULT_HTTP_OWNER",
    "LOCAL_OWNER",
    "ArchivedRow",
    "AgentStore",
    "ArchiveReason",
    "CompactionKind",
    "ExportFormat",
    "Instruction",
    "InstructionLedger",
    "JobInfo",
    "JobSpec",
    "Lease",
    "MediaStore",
    "MemoryEntry",
    "MemoryHit",
    "MemoryStore",
    "MetaStore",
    "OpObserver",
    "OwnedSessionView",
    "ReadScope",
    "SearchHit",
    "SqlJobStore",
    "SessionCatalog",
    "SessionInfo",
    "SessionLocks",
    "SessionSearch",
    "SessionStore",
    "SessionView",
    "SqlSessionStore",
    "StoredMedia",
    "Transcript",
    "chat_owner",
    "default_url",
    "person_owner",
    "sha256_of",
]
