"""Reminders, scheduled jobs and heartbeats: schedule maths, per-owner views, the `schedule` tool."""

from __future__ import annotations

from agent.jobs.manage import (
    SILENCE_MARKER,
    JobKind,
    JobStore,
    JobTarget,
    OwnedJobs,
    chat_of_key,
    is_silent,
    job_line,
    owner_zone,
    run_prompt,
)

__all__ = [
    "SILENCE_MARKER",
    "JobKind",
    "JobStore",
    "JobTarget",
    "OwnedJobs",
    "chat_of_key",
    "is_silent",
    "job_line",
    "owner_zone",
    "run_prompt",
]
