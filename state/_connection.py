"""The store's connection plumbing: one timeout and error translation per operation, queued
SQLite writes, fault-injection points for the crash tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Self

import structlog
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.errors import StoreError
from state.engine import WRITE_OPTION

__all__ = ["FaultHook", "StoreConnection"]

log = structlog.get_logger("state.store")

FaultHook = Callable[[str], None]
"""Test seam: called with "<operation>:<step>" inside write transactions; raising aborts it."""


class StoreConnection:
    """An engine plus the way every store operation uses it."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        fault_hook: FaultHook | None = None,
        op_timeout_s: float = 60.0,
    ) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._sqlite_writes = asyncio.Lock() if engine.dialect.name == "sqlite" else None
        """SQLite has one writer; queueing ours here beats its busy-timeout sleeps by far."""
        self._fault_hook = fault_hook
        self._op_timeout_s = op_timeout_s
        self.dialect = engine.dialect.name

    async def aclose(self) -> None:
        await self._engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    # -- plumbing -------------------------------------------------------------------------------

    @asynccontextmanager
    async def _guard(self, op: str) -> AsyncIterator[None]:
        """A timeout on the whole operation; database failures become StoreError."""
        try:
            async with asyncio.timeout(self._op_timeout_s):
                yield
        except StoreError:
            raise
        except SQLAlchemyError as exc:
            cause = getattr(exc, "orig", None) or exc
            detail = str(cause).splitlines()[0][:200] if str(cause) else ""
            log.warning("store_failed", op=op, error_type=type(cause).__name__)
            raise StoreError(
                f"session store: {op} failed: {type(cause).__name__}: {detail}"
            ) from exc
        except TimeoutError as exc:
            log.warning("store_timed_out", op=op, timeout_s=self._op_timeout_s)
            raise StoreError(
                f"session store: {op} timed out after {self._op_timeout_s:g} s"
            ) from exc

    @asynccontextmanager
    async def _write(self, op: str) -> AsyncIterator[AsyncConnection]:
        async with self._guard(op):
            if self._sqlite_writes is None:
                async with self._writer.begin() as conn:
                    yield conn
            else:
                async with self._sqlite_writes, self._writer.begin() as conn:
                    yield conn

    @asynccontextmanager
    async def _read(self, op: str) -> AsyncIterator[AsyncConnection]:
        async with self._guard(op), self._engine.connect() as conn:
            yield conn

    def _fault(self, step: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(step)
