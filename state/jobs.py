"""Scheduled jobs in the store: create, list and change them per owner; claim due ones atomically.

A due job is claimed by one worker at a time: the claim is a conditional UPDATE of its lease
columns (`claimed_by`, `claimed_until`) that only succeeds while nobody holds an unexpired claim,
after a `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL (so concurrent workers pass over each
other's rows instead of queueing on them); SQLite serialises writers, so there the conditional
UPDATE alone decides. A worker that dies mid-run stops renewing its claim; once it expires,
another worker claims the same run again (`claim_count` 2). Delivery is recorded in the row
(`delivered_due`) before the send, so a run redone after a crash never sends twice.

Every method is one transaction. `owner` filters what a caller may see or change: a person's
view passes their `Principal.owner`; only the scheduler and the operator pass None (all jobs).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import fields
from typing import Any

from sqlalchemy import and_, case, delete, insert, or_, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.sql.elements import ColumnElement

from state._connection import StoreConnection
from state.models import JOBS
from state.values import JobInfo, JobSpec, storable

__all__ = ["JobInfo", "JobSpec", "SqlJobStore"]

MAX_PROMPT_CHARS = 20_000
MAX_ERROR_CHARS = 2_000
EDITABLE = frozenset(
    {"prompt", "schedule", "timezone", "model", "quiet_hours", "catch_up", "paused", "next_run_at"}
)
"""What an owner may change on a job of theirs."""


_COLUMNS = tuple(f.name for f in fields(JobInfo))


def _info(row: RowMapping) -> JobInfo:
    values = {name: row[name] for name in _COLUMNS}
    values["paused"] = bool(values["paused"])
    return JobInfo(**values)


def _mine(owner: str | None) -> ColumnElement[bool]:
    return JOBS.c.owner == owner if owner is not None else JOBS.c.id.is_not(None)


class SqlJobStore:
    """The jobs table over one store connection (`SqlSessionStore.jobs`)."""

    def __init__(self, conn: StoreConnection) -> None:
        self._conn = conn

    async def create(self, spec: JobSpec) -> JobInfo:
        values = {f.name: getattr(spec, f.name) for f in fields(spec)}
        values["prompt"] = storable(spec.prompt)[:MAX_PROMPT_CHARS]
        values["created_at"] = time.time()

        def body(conn: Connection) -> JobInfo:
            new_id = conn.execute(insert(JOBS).values(**values)).inserted_primary_key
            assert new_id is not None
            row = conn.execute(select(JOBS).where(JOBS.c.id == new_id[0])).one()
            return _info(row._mapping)

        return await self._conn._write("job_create", body)

    async def get(self, job_id: int, *, owner: str | None) -> JobInfo | None:
        """The job, when it exists and (with `owner`) is theirs."""

        def body(conn: Connection) -> JobInfo | None:
            stmt = select(JOBS).where((JOBS.c.id == job_id) & _mine(owner))
            row = conn.execute(stmt).one_or_none()
            return None if row is None else _info(row._mapping)

        return await self._conn._read("job_get", body)

    async def list_jobs(self, *, owner: str | None, limit: int = 500) -> list[JobInfo]:
        """The owner's jobs (None: everyone's), oldest first."""

        def body(conn: Connection) -> list[JobInfo]:
            stmt = select(JOBS).where(_mine(owner)).order_by(JOBS.c.id).limit(limit)
            return [_info(r._mapping) for r in conn.execute(stmt)]

        return await self._conn._read("job_list", body)

    async def update(self, job_id: int, *, owner: str | None, **changes: Any) -> JobInfo | None:
        """Change fields of `EDITABLE`; None when there is no such job of `owner`'s."""
        unknown = set(changes) - EDITABLE
        if unknown:
            raise ValueError(f"a job's {sorted(unknown)[0]} cannot be changed")
        if "prompt" in changes:
            changes["prompt"] = storable(str(changes["prompt"]))[:MAX_PROMPT_CHARS]

        def body(conn: Connection) -> JobInfo | None:
            where = (JOBS.c.id == job_id) & _mine(owner)
            if changes:
                conn.execute(update(JOBS).where(where).values(**changes))
            row = conn.execute(select(JOBS).where(where)).one_or_none()
            return None if row is None else _info(row._mapping)

        return await self._conn._write("job_update", body)

    async def remove(self, job_id: int, *, owner: str | None) -> bool:
        """Delete the job; False when there is no such job of `owner`'s."""

        def body(conn: Connection) -> bool:
            stmt = delete(JOBS).where((JOBS.c.id == job_id) & _mine(owner))
            return bool(conn.execute(stmt).rowcount)

        return await self._conn._write("job_remove", body)

    async def claim_due(
        self,
        *,
        now: float,
        worker: str,
        lease_s: float,
        platforms: Collection[str] | None = None,
        stranded_after_s: float = 60.0,
        limit: int = 10,
    ) -> list[JobInfo]:
        """Claim up to `limit` due jobs for `worker` until `now + lease_s`, oldest due first.

        With `platforms`, a job that delivers to another platform's chat is left for a worker
        that can send there, unless it has waited `stranded_after_s` (then it runs here and
        its reply is stored in the chat's session)."""

        def body(conn: Connection) -> list[JobInfo]:
            due = (
                (JOBS.c.paused.is_(False))
                & (JOBS.c.next_run_at <= now)
                & or_(JOBS.c.claimed_until.is_(None), JOBS.c.claimed_until <= now)
            )
            if platforms is not None:
                due = due & or_(
                    JOBS.c.target_platform.is_(None),
                    JOBS.c.target_platform.in_(list(platforms)),
                    JOBS.c.next_run_at <= now - stranded_after_s,
                )
            stmt = select(JOBS.c.id).where(due).order_by(JOBS.c.next_run_at).limit(limit)
            if conn.dialect.name == "postgresql":
                stmt = stmt.with_for_update(skip_locked=True)
            claimed: list[JobInfo] = []
            for job_id in conn.execute(stmt).scalars().all():
                taken = conn.execute(
                    update(JOBS)
                    .where((JOBS.c.id == job_id) & due)
                    .values(
                        claimed_by=worker,
                        claimed_until=now + lease_s,
                        claim_count=_next_claim_count(),
                        claim_due=JOBS.c.next_run_at,
                    )
                ).rowcount
                if taken:
                    row = conn.execute(select(JOBS).where(JOBS.c.id == job_id)).one()
                    claimed.append(_info(row._mapping))
            return claimed

        return await self._conn._write("job_claim", body)

    async def renew(self, job_id: int, *, worker: str, until: float) -> bool:
        """Push the claim's expiry to `until`; False when the claim is no longer this worker's."""

        def body(conn: Connection) -> bool:
            stmt = (
                update(JOBS)
                .where((JOBS.c.id == job_id) & (JOBS.c.claimed_by == worker))
                .values(claimed_until=until)
            )
            return bool(conn.execute(stmt).rowcount)

        return await self._conn._write("job_renew", body)

    async def record_delivery(self, job_id: int, *, worker: str, due: float) -> bool:
        """Mark run `due` delivered before sending it: True means send now; False means it was
        delivered already (a redo after a crash) or the claim is gone (never send then)."""

        def body(conn: Connection) -> bool:
            stmt = (
                update(JOBS)
                .where(
                    (JOBS.c.id == job_id)
                    & (JOBS.c.claimed_by == worker)
                    & or_(JOBS.c.delivered_due.is_(None), JOBS.c.delivered_due != due)
                )
                .values(delivered_due=due)
            )
            return bool(conn.execute(stmt).rowcount)

        return await self._conn._write("job_deliver", body)

    async def finish(self, job_id: int, *, worker: str, **changes: Any) -> bool:
        """End `worker`'s claim, writing the run's result (`next_run_at`, `last_outcome`, ...);
        False when the claim was no longer its own (nothing is written then)."""
        if "last_error" in changes and changes["last_error"] is not None:
            changes["last_error"] = storable(str(changes["last_error"]))[:MAX_ERROR_CHARS]

        def body(conn: Connection) -> bool:
            stmt = (
                update(JOBS)
                .where((JOBS.c.id == job_id) & (JOBS.c.claimed_by == worker))
                .values(claimed_by=None, claimed_until=None, **changes)
            )
            return bool(conn.execute(stmt).rowcount)

        return await self._conn._write("job_finish", body)


def _next_claim_count() -> Any:
    """1 for a new run; one more when the same run is claimed again (its worker died)."""
    return case(
        (
            and_(JOBS.c.claim_due.is_not(None), JOBS.c.claim_due == JOBS.c.next_run_at),
            JOBS.c.claim_count + 1,
        ),
        else_=1,
    )
