"""The sessions themselves: create, find, list, name and delete them; which session a chat is
on; stateless HTTP conversations' heads. `SqlSessionCatalog` implements
`state.contract.SessionCatalog` (`SqlSessionStore.sessions`).

A chat (platform + chat key) points at one session through `chat_routes`. `/new` ends the
session it leaves (end_reason "new") and points the chat at a fresh one; `/resume` points it at
an earlier session, re-opening it when it had been left that way. Another worker that still
routes the chat to the session left behind sees it ended and asks the store again. Every method
is one transaction.

A stateless client resends its whole conversation; the HTTP API recognises the stored session it
continues by a hash of that history (`gateway.http.lineage`), kept in `sessions.lineage_head`
(schema v6, indexed). Taking a head is atomic: of two requests that extend one head at once,
one gets the session and the other gets None (and starts a branch), so no two turns ever claim
to continue the same stored history. Heads never move the session's version (they describe the
client's view, not the stored messages).
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import BindParameter

from state._connection import StoreConnection
from state._statements import _GET, _LOCK, _R, _S, _SID
from state.owners import LOCAL_OWNER, legacy_owner
from state.records import session_fields, session_info_from_row
from state.stats import collect_stats
from state.store_errors import StoreError
from state.values import SessionInfo

__all__ = [
    "LEFT_FOR_ANOTHER",
    "SqlSessionCatalog",
    "locked_session",
    "new_session",
    "new_session_id",
    "session_info",
]

log = structlog.get_logger("state.store")

_HEAD: BindParameter[str] = bindparam("p_head")
_FIND = (
    select(_S.c.id)
    .where((_S.c.lineage_head == _HEAD) & _S.c.end_reason.is_(None))
    .order_by(_S.c.updated_at.desc())
    .limit(1)
)
_FIND_OWNED = _FIND.where(_S.c.owner == bindparam("p_owner"))
_TAKE = (
    update(_S)
    .where((_S.c.id == _SID) & (_S.c.lineage_head == _HEAD))
    .values(lineage_head=bindparam("p_claim"), updated_at=bindparam("p_now"))
)
_SET = update(_S).where(_S.c.id == _SID).values(lineage_head=bindparam("p_claim"))
_CLEAR = (
    update(_S).where((_S.c.id == _SID) & _S.c.lineage_head.is_not(None)).values(lineage_head=None)
)

LEFT_FOR_ANOTHER = "new"
"""The end_reason of a session its chat left for another (`/new`, `/resume`); resumable."""


def new_session_id(now: float | None = None) -> str:
    """Sortable, readable and unique: `20260101_120000_1a2b3c4d`."""
    import uuid

    stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{stamp}_{uuid.uuid4().hex[:8]}"


def session_info(conn: Connection, session_id: str) -> SessionInfo | None:
    """The session as it is in this transaction, or None."""
    row = conn.execute(_GET, {"p_sid": session_id}).one_or_none()
    return None if row is None else session_info_from_row(row._mapping)


def locked_session(conn: Connection, session_id: str) -> dict[str, Any]:
    """The session's row, locked for the rest of this transaction; StoreError when none."""
    row = conn.execute(_LOCK, {"p_sid": session_id}).one_or_none()
    if row is None:
        raise StoreError(f"no session {session_id!r}")
    return dict(row._mapping)


def new_session(conn: Connection, **values: Any) -> str:
    """Insert a session row with `values`; its new id."""
    now = time.time()
    session_id = new_session_id(now)
    defaults = {"id": session_id, "created_at": now, "updated_at": now, "meta": {}}
    conn.execute(insert(_S).values(**defaults, **values))
    return session_id


class SqlSessionCatalog:
    """Sessions, chat → session routes, titles and lineage heads over one store connection."""

    def __init__(self, conn: StoreConnection) -> None:
        self._conn = conn

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
        """A new session belonging to `owner` (`state.owners`; default the machine's owner)."""
        values = {
            **session_fields(
                {
                    "platform": platform,
                    "chat_key": chat_key,
                    "user_id": user_id,
                    "title": title,
                    "model": model,
                    "owner": owner,
                }
            ),
            "parent_session_id": parent_session_id,
        }

        def body(conn: Connection) -> SessionInfo | None:
            return session_info(conn, new_session(conn, **values))

        info = await self._conn._write("create_session", body)
        assert info is not None
        log.info("session_created", session_id=info.id, platform=platform)
        return info

    async def delete_session(self, session_id: str) -> bool:
        """Remove a session and everything it holds (rows cascade); True if it existed. Only for
        a session that must leave no trace, such as the scratch session of a Responses request
        with `store: false`; compaction never deletes."""

        def body(conn: Connection) -> bool:
            gone = conn.execute(delete(_S).where(_S.c.id == session_id))
            return bool(gone.rowcount)

        return bool(await self._conn._write("delete_session", body))

    async def get_session(self, session_id: str) -> SessionInfo | None:
        return await self._conn._read("get_session", lambda conn: session_info(conn, session_id))

    async def list_sessions(
        self, *, limit: int = 50, platform: str | None = None, owner: str | None = None
    ) -> list[SessionInfo]:
        """The newest sessions, of one platform and of one owner when given (None: all)."""
        stmt = select(_S).order_by(_S.c.updated_at.desc(), _S.c.id.desc()).limit(limit)
        if platform is not None:
            stmt = stmt.where(_S.c.platform == platform)
        if owner is not None:
            stmt = stmt.where(_S.c.owner == owner)
        return await self._conn._read(
            "list_sessions",
            lambda conn: [session_info_from_row(r._mapping) for r in conn.execute(stmt)],
        )

    async def stats(self) -> dict[str, Any]:
        """Counts and totals over the whole store."""
        return await self._conn._read("stats", collect_stats)

    async def get_or_create_for_chat(
        self,
        platform: str,
        chat_key: str,
        *,
        user_id: str | None = None,
        model: str | None = None,
        owner: str | None = None,
    ) -> SessionInfo:
        """The chat's current session; a new one when it has none (or it has ended). A new
        session belongs to `owner` (default: the one its route implies, `legacy_owner`); with
        `owner`, a routed session of another owner is never handed out: the chat gets a fresh
        one."""
        platform, chat_key, user_id, model = _route_fields(platform, chat_key, user_id, model)

        def body(conn: Connection) -> tuple[SessionInfo, bool]:
            routed = self._routed(conn, platform, chat_key)
            current = session_info(conn, routed) if routed else None
            if current is not None and current.end_reason is None:
                if owner in (None, current.owner):
                    return current, False
                log.warning("route_owner_mismatch", session_id=current.id, platform=platform)
            fresh = new_session(
                conn,
                platform=platform,
                chat_key=chat_key,
                user_id=user_id,
                model=model,
                owner=owner or legacy_owner(platform, chat_key, user_id),
            )
            return self._point(conn, platform, chat_key, fresh, exists=routed is not None), True

        return await self._routing("route_chat", platform, body)

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
        """`/new`: end the session the chat leaves (`leaving`, default the one it is routed
        to; end_reason "new") and route the chat to a fresh one, belonging to `owner`."""
        platform, chat_key, user_id, model = _route_fields(platform, chat_key, user_id, model)
        owner = owner or legacy_owner(platform, chat_key, user_id)

        def body(conn: Connection) -> tuple[SessionInfo, bool]:
            routed = self._routed(conn, platform, chat_key)
            self._leave(conn, leaving or routed)
            fresh = new_session(
                conn,
                platform=platform,
                chat_key=chat_key,
                user_id=user_id,
                model=model,
                owner=owner,
            )
            return self._point(conn, platform, chat_key, fresh, exists=routed is not None), True

        return await self._routing("start_new_for_chat", platform, body)

    async def resume_for_chat(
        self,
        platform: str,
        chat_key: str,
        session_id: str,
        *,
        leaving: str | None = None,
        owner: str | None = None,
    ) -> SessionInfo:
        """`/resume`: route the chat to `session_id`, re-opening it if a chat had left it, and
        end the session the chat leaves (`leaving`, default the routed one). With `owner`, a
        session of another owner is refused exactly like one that does not exist."""
        platform, chat_key, _, _ = _route_fields(platform, chat_key, None, None)

        def body(conn: Connection) -> tuple[SessionInfo, bool]:
            target = session_info(conn, session_id)
            if target is None or (owner is not None and target.owner != owner):
                raise StoreError(f"no session {session_id!r}")
            routed = self._routed(conn, platform, chat_key)
            if (leaving or routed) != session_id:
                self._leave(conn, leaving or routed)
            if target.end_reason == LEFT_FOR_ANOTHER:
                conn.execute(
                    update(_S)
                    .where(_S.c.id == session_id)
                    .values(end_reason=None, updated_at=time.time(), version=_S.c.version + 1)
                )
            info = self._point(conn, platform, chat_key, session_id, exists=routed is not None)
            return info, True

        return await self._routing("resume_for_chat", platform, body)

    async def set_title(
        self, session_id: str, title: str, *, owner: str | None = None
    ) -> SessionInfo:
        """Name a session (one line; a long one is cut to the column); returns it renamed.
        With `owner`, a session of another owner is "no session", as an unknown id is."""
        clean = session_fields({"title": " ".join(title.split()) or None})["title"]
        where = _S.c.id == session_id
        if owner is not None:
            where &= _S.c.owner == owner

        def body(conn: Connection) -> SessionInfo:
            stmt = (
                update(_S)
                .where(where)
                .values(title=clean, updated_at=time.time(), version=_S.c.version + 1)
            )
            if conn.execute(stmt).rowcount == 0:
                raise StoreError(f"no session {session_id!r}")
            info = session_info(conn, session_id)
            assert info is not None
            return info

        return await self._conn._write("set_title", body)

    async def take_lineage(self, head: str, claim: str, *, owner: str | None = None) -> str | None:
        """The open session whose head is `head`, its head replaced by `claim` in the same
        transaction; None when no session has it (or another request took it first). With
        `owner`, only that owner's sessions count: another key that replays the same history
        finds nothing (and starts its own session)."""
        find = _FIND if owner is None else _FIND_OWNED
        wanted = {"p_head": head} if owner is None else {"p_head": head, "p_owner": owner}

        def body(conn: Connection) -> str | None:
            found = conn.execute(find, wanted).scalar_one_or_none()
            if found is None:
                return None
            params = {"p_sid": found, "p_head": head, "p_claim": claim, "p_now": time.time()}
            return found if conn.execute(_TAKE, params).rowcount == 1 else None

        return await self._conn._write("take_lineage", body)

    async def set_lineage(self, session_id: str, head: str | None) -> None:
        """Make `head` the session's head (None: no stateless request continues it)."""

        def body(conn: Connection) -> None:
            if head is None:
                conn.execute(_CLEAR, {"p_sid": session_id})
            else:
                conn.execute(_SET, {"p_sid": session_id, "p_claim": head})

        await self._conn._write("set_lineage", body)

    # -- one transaction's steps ----------------------------------------------------------------

    async def _routing(self, op: str, platform: str, body: Any) -> SessionInfo:
        for attempt in range(3):
            try:
                info, routed = await self._conn._write(op, body)
            except StoreError as exc:
                # Two writers created the route at once (PostgreSQL): the loser retries.
                if not isinstance(exc.__cause__, IntegrityError) or attempt == 2:
                    raise
                continue
            if routed:
                log.info("session_routed", session_id=info.id, platform=platform, op=op)
            assert isinstance(info, SessionInfo)
            return info
        raise AssertionError("unreachable")

    @staticmethod
    def _routed(conn: Connection, platform: str, chat_key: str) -> str | None:
        where = (_R.c.platform == platform) & (_R.c.chat_key == chat_key)
        found = conn.execute(select(_R.c.session_id).where(where).with_for_update())
        return found.scalar_one_or_none()

    @staticmethod
    def _leave(conn: Connection, session_id: str | None) -> None:
        if session_id is None:
            return
        conn.execute(
            update(_S)
            .where((_S.c.id == session_id) & _S.c.end_reason.is_(None))
            .values(end_reason=LEFT_FOR_ANOTHER, updated_at=time.time(), version=_S.c.version + 1)
        )

    def _point(
        self, conn: Connection, platform: str, chat_key: str, session_id: str, *, exists: bool
    ) -> SessionInfo:
        now = time.time()
        if exists:
            where = (_R.c.platform == platform) & (_R.c.chat_key == chat_key)
            conn.execute(update(_R).where(where).values(session_id=session_id, updated_at=now))
        else:
            conn.execute(
                insert(_R).values(
                    platform=platform, chat_key=chat_key, session_id=session_id, updated_at=now
                )
            )
        info = session_info(conn, session_id)
        assert info is not None
        return info


def _route_fields(
    platform: str, chat_key: str, user_id: str | None, model: str | None
) -> tuple[str, str, str | None, str | None]:
    """The routing fields as the store keeps them (`session_fields`: storable, within limits)."""
    fields = session_fields(
        {"platform": platform, "chat_key": chat_key, "user_id": user_id, "model": model}
    )
    return fields["platform"] or "", fields["chat_key"] or "", fields["user_id"], fields["model"]
