"""The model's summary swapped in for a stopgap: an `EndOfTurnWork`, first in an agent's queue.

When the next request would not fit and no prepared compaction is ready, the agent compacts at
once with the deterministic local summary (`ContextEngine.prepare_stopgap`) instead of making
the user wait for a model call. This work then makes the model's summary of the same middle in
the background (an idle gap on a single-slot server, `agent.server_slot`) and proposes the
transcript with the stopgap's marker replaced by the model's. Adopted at a turn boundary, that
is one `archive_and_compact`: the stopgap's marker row is archived (kept, searchable), the new
marker inserted, every other row carried. When a later compaction absorbed the stopgap first,
or the model gives nothing usable, the stopgap stays: it is a complete summary, only plainer.

At a tight window (`agent.compaction.headroom.is_tight_window`) no upgrade is offered
(`upgrade_pays`): the next batch compaction comes within a few turns (every 5.5 turns at 32K in
issue 31's replay) and absorbs the stopgap's text into the model's summary anyway, while the
upgrade costs a summary call and, on a cached route, a rewrite of the cached prefix from the
marker on (26 upgrades in that replay: some 40K output tokens and 26 cache writes of the prompt).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from agent.background import SessionView
from agent.compaction.headroom import is_tight_window
from agent.compaction.markers import SummaryRole, make_summary_marker
from agent.context_engine import ContextEngine, SummaryUpgrade
from agent.errors import CompactionRefused
from agent.messages import ChatMessage
from agent.proposals import Proposal

__all__ = ["StopgapUpgrade", "upgrade_pays"]

log = structlog.get_logger(__name__)


def upgrade_pays(context_length: int) -> bool:
    """Whether a stopgap's model summary is worth its call: not at a tight window, where the
    next batch compaction replaces the stopgap within a few turns."""
    return not is_tight_window(context_length)


@dataclass(frozen=True, slots=True)
class _Pending:
    marker: ChatMessage
    """The stopgap's marker: the very message object of the live transcript."""
    upgrade: SummaryUpgrade


class StopgapUpgrade:
    """One agent's pending upgrade: at most one (a newer stopgap replaces an older one)."""

    def __init__(self) -> None:
        self._pending: _Pending | None = None

    @property
    def pending(self) -> bool:
        return self._pending is not None

    def offer(self, marker: ChatMessage, upgrade: SummaryUpgrade, engine: ContextEngine) -> None:
        """A stopgap compaction committed `marker`; `upgrade` makes the model's summary, unless
        the engine's window is tight (`upgrade_pays`): then the stopgap stays."""
        pays = upgrade_pays(engine.context_length)
        self._pending = _Pending(marker, upgrade) if pays else None

    def delay_s(self, session: SessionView) -> float | None:
        return 0.0 if self._pending is not None else None

    async def __call__(self, session: SessionView) -> Proposal | None:
        pending = self._pending
        if pending is None:
            return None
        snapshot = list(session.transcript)
        index = next((i for i, m in enumerate(snapshot) if m is pending.marker), None)
        if index is None:  # a later compaction absorbed the stopgap: its text lives on there
            self._pending = None
            return None
        try:
            text = await pending.upgrade()
        except asyncio.CancelledError:
            raise  # a user turn took the server: tried again in the next idle gap
        except CompactionRefused as exc:
            self._pending = None
            log.info("stopgap_kept", session_id=session.session_id, reason=exc.reason)
            return None
        role: SummaryRole = "assistant" if pending.marker.get("role") == "assistant" else "user"
        prefix = [*snapshot[:index], make_summary_marker(text, role), *snapshot[index + 1 :]]

        async def adopted(_transcript: list[ChatMessage]) -> None:
            if self._pending is pending:
                self._pending = None
            log.info("stopgap_upgraded", session_id=session.session_id)

        return Proposal(kind="upgrade", base=tuple(snapshot), prefix=prefix, on_adopted=adopted)

    def forget_session(self, session_id: str) -> None:
        """The transcript was reloaded: the stopgap's marker object is gone with it."""
        self._pending = None
