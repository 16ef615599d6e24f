"""The store's connection plumbing: each operation is one sync function run in one hop, with one
timeout and error translation; SQLite on the store's own worker threads, fault-injection points."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Self, TypeVar

import structlog
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from state._faults import describe_failure, explain_failure
from state.engine import WRITE_OPTION
from state.store_errors import StoreCorrupt, StoreError, StoreUnavailable

__all__ = ["FaultHook", "OpObserver", "StoreConnection", "refuse_directory"]

CHECK_CACHE_SIZE = -2048
"""SQLite's page cache (negative: KiB) while `quick_check` or `integrity_check` reads the file."""

log = structlog.get_logger("state.store")

T = TypeVar("T")
NEW_FILE_GRACE_S = 5.0
"""How long a new, still empty SQLite file may take to receive its schema from the worker
that is creating it before it counts as an emptied database."""
_POLL_S = 0.05

FaultHook = Callable[[str], None]
"""Test seam: called with "<operation>:<step>" inside write transactions; raising aborts it."""
OpObserver = Callable[[str, float, bool], None]
"""Called after every operation with (operation name, seconds, succeeded); must not raise."""


class StoreConnection:
    """An engine plus the way every store operation uses it.

    An operation's body is a synchronous function over a SQLAlchemy `Connection`, inside one
    transaction. On PostgreSQL it runs through `AsyncConnection.run_sync` (asyncpg, in a greenlet).
    On a SQLite file it runs on the store's writer thread (writes; SQLite has one writer, so the
    thread is the write queue) or reader thread (reads) over pysqlite: one hop per operation.
    A task cancelled (or timed out) while its operation waits in the queue drops it. A write
    already running commits or rolls back all the same, and the cancelled task waits for that
    outcome (and its stamps, `on_commit`) before the cancellation goes on, so what the caller
    holds in memory always matches what the store committed.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        sync_engine: Engine | None = None,
        fault_hook: FaultHook | None = None,
        op_timeout_s: float = 60.0,
        on_op: OpObserver | None = None,
        where: str = "the session database",
    ) -> None:
        self._engine = engine
        self.where = where
        """How messages name the database (a file path, or PostgreSQL's host and database)."""
        self.damaged = False
        """Set once the database reported damage: writes are refused from then on."""
        self._on_op = on_op
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._sync_engine = sync_engine
        self._write_thread = self._read_thread = None
        if sync_engine is not None:
            writer = sync_engine.execution_options(**{WRITE_OPTION: True})
            self._write_thread = _Worker(writer, "hermes-store-write")
            self._read_thread = _Worker(sync_engine, "hermes-store-read")
        self._fault_hook = fault_hook
        self._op_timeout_s = op_timeout_s
        self.dialect = engine.dialect.name

    async def aclose(self) -> None:
        if self._sync_engine is not None:
            await asyncio.to_thread(self._close_threads)
        await self._engine.dispose()

    def _close_threads(self) -> None:
        """Let queued and running operations finish, then close the pysqlite connections."""
        for worker in (self._write_thread, self._read_thread):
            if worker is not None:
                worker.shutdown()
        if self._sync_engine is not None:
            self._sync_engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def check_integrity(self, *, full: bool = False) -> list[str]:
        """SQLite's own check of the file (`quick_check`, or `integrity_check` with `full`):
        the problems it reports, [] when sound. PostgreSQL checks its pages itself: []."""
        if self.dialect != "sqlite":
            return []
        pragma = "integrity_check" if full else "quick_check"

        def check(conn: Connection) -> list[str]:
            # The check reads every page of the file. With the connection's own cache (32 MiB)
            # it would keep them all: `hermes chat -q` on a 60 MB file peaked 34 MB higher.
            cache_size = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
            conn.exec_driver_sql(f"PRAGMA cache_size={CHECK_CACHE_SIZE}")
            try:
                return [str(r[0]) for r in conn.exec_driver_sql(f"PRAGMA {pragma}")]
            finally:
                conn.exec_driver_sql(f"PRAGMA cache_size={int(cache_size)}")

        rows = await self._read("check_integrity", check)
        return [] if rows == ["ok"] else rows

    async def _refuse_damage(self) -> None:
        problems = await self.check_integrity()
        if problems:
            self.damaged = True
            log.error("store_damaged", problems=problems[:5])
            hint = describe_failure(StoreCorrupt, self.where, self.dialect)
            raise StoreCorrupt(f"{hint} (first problem: {problems[0][:200]})")

    # -- plumbing -------------------------------------------------------------------------------

    @asynccontextmanager
    async def _guard(self, op: str) -> AsyncIterator[None]:
        """A timeout on the whole operation; database failures become StoreError; the
        operation's time goes to `on_op`."""
        started = time.perf_counter()
        ok = False
        try:
            async with self._translated(op):
                yield
            ok = True
        finally:
            if self._on_op is not None:
                self._on_op(op, time.perf_counter() - started, ok)

    @asynccontextmanager
    async def _translated(self, op: str) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(self._op_timeout_s):
                yield
        except StoreError:
            raise
        except TimeoutError as exc:
            log.warning("store_timed_out", op=op, timeout_s=self._op_timeout_s)
            raise StoreUnavailable(
                f"session store: {op} timed out after {self._op_timeout_s:g} s"
            ) from exc
        except (SQLAlchemyError, OSError) as exc:
            cause = getattr(exc, "orig", None) or exc
            kind, hint = explain_failure(cause, self.where, self.dialect)
            detail = str(cause).splitlines()[0][:200] if str(cause) else ""
            log.warning("store_failed", op=op, error_type=type(cause).__name__, kind=kind.__name__)
            if kind is StoreCorrupt:
                self.damaged = True
            # A hint is a whole sentence for the user; the operation's name is for the log.
            raise kind(
                hint or f"session store: {op} failed: {type(cause).__name__}: {detail}"
            ) from exc
        except UnicodeError as exc:  # every writer passes `storable`; this is the last net
            raise StoreError(f"session store: {op} failed: text that cannot be stored") from exc

    async def _write(
        self,
        op: str,
        body: Callable[[Connection], T],
        *,
        on_commit: Callable[[T], None] | None = None,
    ) -> T:
        """Run `body` in one writing transaction; `on_commit(result)` runs on the loop once it
        committed (even when the awaiting task was cancelled meanwhile), before this returns."""
        if self.damaged:
            hint = describe_failure(StoreCorrupt, self.where, self.dialect)
            raise StoreCorrupt(f"session store: {op} refused: {hint}")
        if self._write_thread is None:
            task = asyncio.ensure_future(self._write_async(op, body, on_commit))
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                await _outlast_cancellation(task, self._op_timeout_s)
                raise
        return await self._in_thread(op, self._write_thread, body, on_commit, settle=True)

    async def _write_async(
        self, op: str, body: Callable[[Connection], T], on_commit: Callable[[T], None] | None
    ) -> T:
        async with self._guard(op), self._writer.begin() as conn:
            result = await conn.run_sync(body)
        if on_commit is not None:
            on_commit(result)
        return result

    async def _read(self, op: str, body: Callable[[Connection], T]) -> T:
        """Run `body` in one reading transaction."""
        if self._read_thread is None:
            async with self._guard(op), self._engine.connect() as conn:
                return await conn.run_sync(body)
        return await self._in_thread(op, self._read_thread, body, None)

    async def _in_thread(
        self,
        op: str,
        worker: _Worker,
        body: Callable[[Connection], T],
        on_commit: Callable[[T], None] | None,
        *,
        settle: bool = False,
    ) -> T:
        """`body` in one transaction on `worker`'s thread and connection. `settle`: a cancelled
        caller waits for a running job's outcome (writes)."""
        loop = asyncio.get_running_loop()
        async with self._guard(op):
            waiter: asyncio.Future[T] = loop.create_future()
            settled: asyncio.Future[None] = loop.create_future()
            try:
                job = worker.submit(body)
            except RuntimeError as exc:  # the executor was shut down
                raise StoreError(f"session store: {op} after the store was closed") from exc
            # One wake-up of the loop per operation: stamps first, then the awaiting task.
            job.add_done_callback(lambda done: _hand_over(loop, done, waiter, on_commit, settled))
            try:
                return await waiter
            except asyncio.CancelledError:
                # Only drops it while still queued; a running job finishes alone.
                if not job.cancel() and settle:
                    await _outlast_cancellation(settled, self._op_timeout_s)
                raise

    def _fault(self, step: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(step)


class _Worker:
    """One SQLite worker thread and the one connection it keeps open between operations.

    Each operation is one transaction on that connection: no pool checkout, no reset on
    return, no new connection per call. A connection that failed mid-transaction or was
    invalidated is closed, and the next operation opens a fresh one.
    """

    def __init__(self, engine: Engine, name: str) -> None:
        self._engine = engine
        self._pool = concurrent.futures.ThreadPoolExecutor(1, name)
        self._conn: Connection | None = None  # used on the worker thread only

    def submit(self, body: Callable[[Connection], T]) -> concurrent.futures.Future[T]:
        return self._pool.submit(self._run, body)

    def shutdown(self) -> None:
        """Let queued and running operations finish, then close the connection."""
        try:
            self._pool.submit(self._close).result()
        except RuntimeError:  # already shut down
            pass
        self._pool.shutdown(wait=True)

    def _run(self, body: Callable[[Connection], T]) -> T:
        conn = self._conn
        if conn is None or conn.closed or conn.invalidated:
            conn = self._conn = self._engine.connect()
        try:
            with conn.begin():
                return body(conn)
        except BaseException:
            if conn.invalidated or conn.in_transaction():
                self._close()  # not reusable as it is: the next operation reconnects
            raise

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def refuse_directory(database: str | None) -> None:
    """A directory where the SQLite file should be is a mistake to name, not to retry."""
    if not database or database == ":memory:":
        return
    if os.path.isdir(database):
        raise StoreError(
            f"the session database {database} is a directory; state.url must name a file"
        )


async def refuse_empty_file(database: str | None) -> None:
    """An existing file of 0 bytes is a database that lost everything (a failed copy, a
    truncation), and SQLite would silently start afresh in it: it is refused, saying what to do.
    A file made moments ago may be another worker creating the schema (SQLite makes the file
    before its first commit): that one is given until `NEW_FILE_GRACE_S` after its creation
    to grow."""
    for _ in range(int(NEW_FILE_GRACE_S / _POLL_S) + 1):
        left = _empty_file_grace(database)
        if left is None or left <= 0:
            break
        await asyncio.sleep(min(_POLL_S, left))
    if _empty_file_grace(database) is not None:
        raise StoreCorrupt(
            f"the session database {database} is an empty file (0 bytes): its sessions are "
            "gone, or it was never written. Restore it from a backup, or delete it to start "
            "with no history."
        )


def _empty_file_grace(database: str | None) -> float | None:
    """None unless `database` is an existing empty file; then the seconds its grace has left."""
    if not database or database == ":memory:" or not os.path.isfile(database):
        return None
    if os.path.getsize(database) > 0:
        return None
    return os.path.getmtime(database) + NEW_FILE_GRACE_S - time.time()


def _hand_over(
    loop: asyncio.AbstractEventLoop,
    done: concurrent.futures.Future[T],
    waiter: asyncio.Future[T],
    on_commit: Callable[[T], None] | None,
    settled: asyncio.Future[None],
) -> None:
    """Worker-thread side: pass the job's outcome to the event loop in one call."""
    try:
        loop.call_soon_threadsafe(_settle, done, waiter, on_commit, settled)
    except RuntimeError:  # the loop is already closed: nobody is left to see the outcome
        pass


async def _outlast_cancellation(pending: asyncio.Future[Any], limit_s: float) -> None:
    """Wait (at most `limit_s`) for a write a cancelled task started, so its outcome is known
    before the cancellation goes on; further cancellations meanwhile fold into that one."""
    deadline = asyncio.get_running_loop().time() + limit_s
    while not pending.done():
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(pending)
        except asyncio.CancelledError:
            continue
        except TimeoutError:
            break
        except Exception:  # its failure is the write's own: the caller is cancelled anyway
            break
    if pending.done() and not pending.cancelled():
        pending.exception()  # retrieved: a failure here is not "never retrieved"


def _settle(
    done: concurrent.futures.Future[T],
    waiter: asyncio.Future[T],
    on_commit: Callable[[T], None] | None,
    settled: asyncio.Future[None],
) -> None:
    """Loop side: stamp a committed result (even if nobody awaits it now), then wake the task."""
    try:
        _settle_waiter(done, waiter, on_commit)
    finally:
        if not settled.done():
            settled.set_result(None)


def _settle_waiter(
    done: concurrent.futures.Future[T],
    waiter: asyncio.Future[T],
    on_commit: Callable[[T], None] | None,
) -> None:
    if done.cancelled():
        if not waiter.done():
            waiter.cancel()
        return
    error = done.exception()
    if error is None and on_commit is not None:
        try:
            on_commit(done.result())
        except Exception as exc:  # a bug in the stamping: fail the awaiting task, not the loop
            error = exc
    if waiter.done():
        return
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(done.result())
