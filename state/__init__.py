"""The session store: everything ever said, kept; compaction only changes what is active."""

from __future__ import annotations

from state._connection import OpObserver
from state.contract import CompactionKind, ExportFormat, Lease, SessionStore
from state.engine import default_url
from state.jobs import SqlJobStore
from state.store import SqlSessionStore
from state.values import ArchivedRow, Instruction, JobInfo, JobSpec, SearchHit, SessionInfo

__all__ = [
    "ArchivedRow",
    "CompactionKind",
    "ExportFormat",
    "Instruction",
    "JobInfo",
    "JobSpec",
    "Lease",
    "OpObserver",
    "SearchHit",
    "SqlJobStore",
    "SessionInfo",
    "SessionStore",
    "SqlSessionStore",
    "default_url",
]
