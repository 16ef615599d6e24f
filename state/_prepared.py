"""The store's hottest statements on SQLite: compiled by SQLAlchemy once, run on the driver's cursor.

Going through `Connection.execute` costs an execution context, events and a result object per
statement: as much again as a one-row insert into an indexed, full-text searched table. A
`Prepared` statement is the same SQLAlchemy statement, compiled once for the dialect, its
parameters bound by the column types' own processors (JSON, booleans), then handed to the DBAPI
cursor of the operation's own connection, inside the operation's transaction; pysqlite keeps the
prepared statement in its per-connection cache. (A `:memory:` store, which runs through aiosqlite,
takes the ordinary path.) A driver error is raised as SQLAlchemy would raise it
(`DBAPIError.instance`), so the store classifies it as before. On PostgreSQL (asyncpg
behind a greenlet) it is a plain `conn.execute`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert, Update

__all__ = ["Prepared", "sqlite_rows"]


class Prepared:
    """One DML statement; `run` returns the first column of its first returned row, or the
    inserted row's id for an insert without RETURNING."""

    def __init__(self, stmt: Insert | Update) -> None:
        self.stmt = stmt
        self._forms: dict[tuple[int, tuple[str, ...]], _Form] = {}

    def run(self, conn: Connection, params: Mapping[str, Any]) -> int | None:
        dbapi = conn.connection.driver_connection
        if not isinstance(dbapi, sqlite3.Connection):  # PostgreSQL, or SQLite through aiosqlite
            return self._run_sqlalchemy(conn, params)
        form = self._form(conn, params)
        compiled = form.compiled
        values = compiled.construct_params(dict(params))
        args = [
            values[name] if process is None else process(values[name])
            for name, process in form.binds
        ]
        cursor = dbapi.cursor()
        try:
            cursor.execute(compiled.string, args)
            if compiled.effective_returning:
                row = cursor.fetchone()
                return None if row is None else int(row[0])
            row_id = cursor.lastrowid
            return None if row_id is None else int(row_id)
        except conn.dialect.loaded_dbapi.Error as exc:
            raise _translated(compiled.string, args, exc, conn) from exc
        finally:
            cursor.close()

    def _run_sqlalchemy(self, conn: Connection, params: Mapping[str, Any]) -> int | None:
        result = conn.execute(self.stmt, dict(params))
        if isinstance(self.stmt, Insert):  # its id (PostgreSQL returns it implicitly)
            key = result.inserted_primary_key
            return None if key is None else int(key[0])
        value = result.scalar_one_or_none()
        return None if value is None else int(value)

    def _form(self, conn: Connection, params: Mapping[str, Any]) -> _Form:
        keys = tuple(params) if isinstance(self.stmt, Insert) else ()
        slot = (id(conn.dialect), keys)
        form = self._forms.get(slot)
        if form is None:
            dialect = conn.dialect
            compiled = self.stmt.compile(dialect=dialect, column_keys=list(keys) or None)
            assert isinstance(compiled, SQLCompiler)
            binds = tuple(
                (name, compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect))
                for name in compiled.positiontup or ()
            )
            form = self._forms[slot] = _Form(compiled=compiled, binds=binds)
        return form


@dataclass(frozen=True, slots=True)
class _Form:
    """A statement compiled for one dialect, with each positional bind's type processor."""

    compiled: SQLCompiler
    binds: tuple[tuple[str, Callable[[Any], Any] | None], ...]


def sqlite_rows(conn: Connection, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of a SQLite query written with named `:params`, as the driver's tuples: for
    a long text query (search) whose columns need no type processing."""
    dbapi = conn.connection.driver_connection
    if not isinstance(dbapi, sqlite3.Connection):  # through aiosqlite (a `:memory:` store)
        return [tuple(row) for row in conn.exec_driver_sql(sql, dict(params))]
    cursor = dbapi.cursor()
    try:
        cursor.execute(sql, dict(params))
        return list(cursor.fetchall())
    except conn.dialect.loaded_dbapi.Error as exc:
        raise _translated(sql, list(params.values()), exc, conn) from exc
    finally:
        cursor.close()


def _translated(
    statement: str, args: Sequence[Any], exc: Exception, conn: Connection
) -> BaseException:
    return DBAPIError.instance(
        statement, list(args), exc, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect
    )
