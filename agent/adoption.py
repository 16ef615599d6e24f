"""How an agent swaps in what background work proposed: at a turn boundary, with catch-up.

`AIAgent` inherits `AdoptsProposals`; the rules of when (`agent.compaction.speculation`) and
how (`agent.proposals.catch_up`) live beside it, this is the thin shell that commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from agent.background import BackgroundWork
from agent.client_tools import pending_calls
from agent.compaction.speculation import Growth, should_adopt_batch
from agent.errors import ConcurrentModification
from agent.messages import ChatMessage
from agent.proposals import Proposal, catch_up
from agent.tokens import estimate_tokens_rough
from state.contract import CompactionKind
from state.values import SessionInfo, Usage

if TYPE_CHECKING:
    from agent.context_engine import CompactionReason, ContextEngine
    from agent.deps import AgentDeps

__all__ = ["AdoptsProposals"]

log = structlog.get_logger(__name__)


class AdoptsProposals:
    """The proposal half of `AIAgent` (which provides the attributes and hooks below)."""

    session_id: str
    transcript: list[ChatMessage]
    engine: ContextEngine
    deps: AgentDeps
    known_version: int | None
    last_usage: Usage | None
    last_request_at: float | None
    growth: Growth
    _background: BackgroundWork

    async def commit_compaction(
        self, messages: list[ChatMessage], *, kind: CompactionKind, expected_version: int | None
    ) -> None:
        raise NotImplementedError

    async def _reload(self, info: SessionInfo | None) -> None:
        raise NotImplementedError

    async def _with_ledger(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        raise NotImplementedError

    def _emit(self, name: str, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    async def adopt_ready(self, *, incoming: str = "", force: bool = False) -> bool:
        """Adopt what background work proposed, at a turn boundary (hold the session's lock).

        A micro-compaction pass is adopted at once. A prepared batch compaction waits until it
        is needed: the coming turn (`incoming` and a turn's growth) would cross the threshold,
        or the prompt cache is cold anyway; `force` adopts it regardless. Returns whether the
        transcript changed.
        """
        proposal = self._background.ready
        if proposal is None or pending_calls(self.transcript):
            return False  # a caller's tool results come first: nothing may cut between
        if proposal.kind == "batch" and not force and not self._batch_due(incoming):
            return False
        self._background.take()
        before = self.transcript
        tokens_before = self.engine.current_tokens(before)
        new = catch_up(proposal, before)
        if new is None:
            return await self._drop(proposal, "transcript_changed")
        reason: CompactionReason = "threshold"
        self._emit("compaction:start", {"session_id": self.session_id, "reason": reason})
        if proposal.kind == "batch":
            new = await self._with_ledger(new)  # standing instructions stay in the head
        try:
            await self.commit_compaction(
                new, kind=proposal.kind, expected_version=self.known_version
            )
        except ConcurrentModification:
            await self._reload(None)
            return await self._drop(proposal, "session_changed")
        except Exception as exc:  # adoption is best effort: the turn goes on either way
            log.warning(
                "proposal_not_stored", session_id=self.session_id, error_type=type(exc).__name__
            )
            return await self._drop(proposal, "store_failed")
        if proposal.result is not None:
            self.engine.adopt(proposal.result)
            self.last_usage = None
        if proposal.on_adopted is not None:
            await proposal.on_adopted(new)
        payload: dict[str, Any] = {
            "session_id": self.session_id,
            "in_place": True,
            "kind": proposal.kind,
            "messages_before": len(before),
            "messages_after": len(new),
            "tokens_before": tokens_before,
            "tokens_after": self.engine.current_tokens(new),
            "seconds": proposal.result.duration_ms / 1000 if proposal.result else 0.0,
        }
        self._emit("session:compress", {**payload, "old_session_id": "", "reason": reason})
        return True

    async def drop_proposal(self) -> None:
        """The agent leaves memory without another turn: what background work proposed goes
        (its work is redone when the session comes back)."""
        proposal = self._background.take()
        if proposal is not None:
            await self._drop(proposal, "agent_evicted")

    def _batch_due(self, incoming: str) -> bool:
        last, ttl = self.last_request_at, self.deps.cache_ttl_s
        cold = ttl is None or last is None or self.deps.clock() - last > ttl
        return should_adopt_batch(
            tokens=self.engine.current_tokens(self.transcript),
            incoming_tokens=estimate_tokens_rough(incoming),
            growth=self.growth,
            threshold_tokens=self.engine.threshold_tokens,
            cache_cold=cold,
        )

    async def _drop(self, proposal: Proposal, why: str) -> bool:
        log.info("proposal_dropped", session_id=self.session_id, kind=proposal.kind, why=why)
        if proposal.on_dropped is not None:
            await proposal.on_dropped(why)
        return False
