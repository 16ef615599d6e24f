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
from sqlalchemy.exc import DBAPIError, InvalidRequestError
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
        args = form.arguments(params)
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
                _positional(compiled, name, dialect) for name in compiled.positiontup or ()
            )
            # Escaped names, callables, expanding lists: let SQLAlchemy build the values.
            direct = not compiled.escaped_bind_names and all(
                not (b.callable or b.expanding) for b in compiled.binds.values()
            )
            form = self._forms[slot] = _Form(compiled=compiled, binds=binds, direct=direct)
        return form


@dataclass(frozen=True, slots=True)
class _Bind:
    """One positional parameter: where its value comes from and its type's processor."""

    name: str
    key: str
    """The bind's key (`bindparam("p_sid")`, an insert's column key): looked up first."""
    literal: Any
    """The value written into the statement (`version + 1`), used when the caller gives none."""
    required: bool
    process: Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Form:
    """A statement compiled for one dialect, with each positional bind's source and processor."""

    compiled: SQLCompiler
    binds: tuple[_Bind, ...]
    direct: bool
    """Values read straight from the caller's mapping; else through `construct_params`."""

    def arguments(self, params: Mapping[str, Any]) -> list[Any]:
        """The driver's positional arguments: what `construct_params` and the type processors
        give, without building its intermediate dictionary on every call."""
        if not self.direct:
            values = self.compiled.construct_params(dict(params))
            return [
                values[b.name] if b.process is None else b.process(values[b.name])
                for b in self.binds
            ]
        args = []
        for b in self.binds:
            if b.key in params:
                value = params[b.key]
            elif b.name in params:
                value = params[b.name]
            elif b.required:
                raise InvalidRequestError(f"A value is required for bind parameter {b.key!r}")
            else:
                value = b.literal
            args.append(value if b.process is None else b.process(value))
        return args


def _positional(compiled: SQLCompiler, name: str, dialect: Any) -> _Bind:
    bind = compiled.binds[name]
    return _Bind(
        name=name,
        key=bind.key,
        literal=bind.value,
        required=bool(bind.required),
        process=bind.type.dialect_impl(dialect).bind_processor(dialect),
    )


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
