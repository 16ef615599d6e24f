"""Batch compaction prepared ahead of the threshold, in the background: an `EndOfTurnWork`.

When the session's growth says the threshold is a few turns away, the compaction is computed
from a snapshot after the reply (`ContextEngine.prepare`: plan and summary, nothing adopted)
and proposed. The agent swaps it in at the turn boundary where it is needed, with everything
appended meanwhile kept (`agent.proposals`). The user never waits for the summary; blocking
compaction inside a turn is left for a request that would not fit at all.
"""

from __future__ import annotations

import structlog

from agent.background import SessionView
from agent.compaction.speculation import should_speculate
from agent.config import CompressionConfig
from agent.errors import CompactionRefused
from agent.proposals import Proposal

__all__ = ["SpeculativeCompaction"]

log = structlog.get_logger(__name__)


class SpeculativeCompaction:
    """Prepares the next batch compaction early (`compression.speculative`, on by default)."""

    def __init__(self, config: CompressionConfig) -> None:
        self._config = config
        self._refused_at: dict[str, int] = {}
        """Prompt size at which a session's last preparation was refused: not again before it
        grew by another turn (a refusal does not go away by asking every turn)."""

    def delay_s(self, session: SessionView) -> float | None:
        """0 to prepare now, None when the threshold is not near (or this cannot help)."""
        if not (self._config.enabled and self._config.speculative):
            return None
        engine = session.engine
        if not engine.prepares_ahead:
            return None  # its prepare() would count as a compaction done
        tokens = engine.current_tokens(session.transcript)
        refused = self._refused_at.get(session.session_id)
        if refused is not None and tokens < refused + max(session.growth.per_turn, 1.0):
            return None
        near = should_speculate(
            tokens=tokens,
            growth=session.growth,
            threshold_tokens=engine.threshold_tokens,
            context_length=engine.context_length,
        )
        return 0.0 if near else None

    async def __call__(self, session: SessionView) -> Proposal | None:
        snapshot = list(session.transcript)
        engine = session.engine
        try:
            result = await engine.prepare(snapshot, reason="threshold")
        except CompactionRefused as exc:
            self._refused_at[session.session_id] = engine.current_tokens(snapshot)
            log.info("compaction_not_prepared", session_id=session.session_id, reason=exc.reason)
            return None
        self._refused_at.pop(session.session_id, None)
        log.info(
            "compaction_prepared",
            session_id=session.session_id,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
        )
        return Proposal(kind="batch", base=tuple(snapshot), prefix=result.messages, result=result)

    def forget_session(self, session_id: str) -> None:
        self._refused_at.pop(session_id, None)
