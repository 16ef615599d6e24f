"""The store as one reader may see it: `OwnedSessionView` implements `state.contract.SessionView`,
every read filtered by a `ReadScope` (`SessionStore.view(scope)` makes one).

Tools and chat commands never hold the raw `SessionStore`: they get a view bound to the owner
the turn acts for (`agent.access.TurnAccess.scope`). A view reads only that owner's sessions
(every owner's when an admin was widened by config); a session of another owner looks exactly
like one that does not exist. The filter is part of each query (`owner=` on the reads of the
store's `sessions` and `search` roles), so nothing is read and then dropped. Later readers (memory notes, scheduled jobs) add their
reads here behind the same `ReadScope`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from state.values import ArchivedRow, ReadScope, SearchHit, SessionInfo

if TYPE_CHECKING:
    from state.contract import SessionCatalog, SessionSearch

__all__ = ["OwnedSessionView"]


class OwnedSessionView:
    """`SessionView` over the store's catalog and search: the scope's owner goes into every query."""

    # Not a store: `agent.tools.args.scoped_services` tells views from stores by `view`.

    __slots__ = ("_scope", "_search", "_sessions")

    def __init__(self, sessions: SessionCatalog, search: SessionSearch, scope: ReadScope) -> None:
        self._sessions = sessions
        self._search = search
        self._scope = scope

    @property
    def scope(self) -> ReadScope:
        return self._scope

    async def get_session(self, session_id: str) -> SessionInfo | None:
        info = await self._sessions.get_session(session_id)
        return info if info is not None and self._scope.may_read(info.owner) else None

    async def list_sessions(
        self, *, limit: int = 50, platform: str | None = None
    ) -> list[SessionInfo]:
        return await self._sessions.list_sessions(
            limit=limit, platform=platform, owner=self._scope.owner_filter
        )

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        role: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 20,
        superseded_summaries: bool = True,
    ) -> list[SearchHit]:
        return await self._search.search(
            query,
            session_id=session_id,
            role=role,
            since=since,
            until=until,
            limit=limit,
            superseded_summaries=superseded_summaries,
            owner=self._scope.owner_filter,
        )

    async def read_rows(
        self,
        session_id: str,
        *,
        ids: Sequence[int] | None = None,
        first_id: int | None = None,
        last_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
        include_summaries: bool = False,
    ) -> list[ArchivedRow]:
        return await self._search.read_rows(
            session_id,
            ids=ids,
            first_id=first_id,
            last_id=last_id,
            limit=limit,
            offset=offset,
            include_summaries=include_summaries,
            owner=self._scope.owner_filter,
        )
