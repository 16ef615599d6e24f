"""How an agent swaps in what background work proposed: at a turn boundary, with catch-up.

`AIAgent` holds a `ProposalAdopter` (`agent.proposals`), which reaches the agent only through
`AdoptionHost`. The rules of when (`agent.compaction.speculation`) and how
(`agent.proposals.catch_up`) live beside it; this is the thin shell that commits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import structlog

from agent.background import BackgroundWork, SessionView
from agent.client_tools import pending_calls
from agent.compaction.micro_cadence import cache_ttl_seconds
from agent.compaction.speculation import should_adopt_batch
from agent.errors import ConcurrentModification
from agent.events import CompactionBegan, CompactionCommitted, EventSink
from agent.messages import ChatMessage
from agent.proposals import Proposal, catch_up
from agent.tokens import estimate_tokens_rough
from state.contract import CompactionKind
from state.values import Usage

if TYPE_CHECKING:
    from agent.context_engine import CompactionReason, CompressResult
    from agent.events import EventSink

__all__ = ["AdoptionHost", "ProposalAdopter", "WithLedger", "WithMemory"]

log = structlog.get_logger(__name__)

WithLedger = Callable[[list[ChatMessage]], Awaitable[list[ChatMessage]]]
"""A compacted transcript with the standing instructions in its head (`LedgerKeeper`)."""
WithMemory = Callable[[list[ChatMessage], "CompressResult | None"], Awaitable[list[ChatMessage]]]
"""A compacted transcript with its facts kept and the memory block renewed (`MemoryKeeper`)."""


class AdoptionHost(SessionView, Protocol):
    """What adopting a proposal needs of the agent, beyond what background work reads."""

    last_usage: Usage | None
    """The last model call's usage: void once a compaction is adopted."""

    async def commit_compaction(
        self,
        messages: list[ChatMessage],
        *,
        kind: CompactionKind | None,
        expected_version: int | None,
    ) -> None:
        """Make `messages` the active set; raises ConcurrentModification, having reloaded the
        stored set, when the session moved since `expected_version`."""
        ...


class ProposalAdopter:
    """Adopts (or drops) the proposal waiting in an agent's background slot."""

    def __init__(
        self,
        host: AdoptionHost,
        background: BackgroundWork,
        *,
        with_ledger: WithLedger,
        emit: EventSink,
        with_memory: WithMemory | None = None,
    ) -> None:
        self._host = host
        self._background = background
        self._with_ledger = with_ledger
        self._with_memory = with_memory
        self._emit = emit

    async def adopt_ready(self, *, incoming: str = "", force: bool = False) -> bool:
        """Adopt what background work proposed, at a turn boundary (hold the session's lock).

        A micro-compaction pass is adopted at once. A prepared batch compaction waits until it
        is needed: the coming turn (`incoming` and a turn's growth) would cross the threshold,
        or the prompt cache is cold anyway; `force` adopts it regardless. Returns whether the
        transcript changed.
        """
        host = self._host
        proposal = self._background.ready
        if proposal is None or pending_calls(host.transcript):
            return False  # a caller's tool results come first: nothing may cut between
        if proposal.kind == "batch" and not force and not self._batch_due(incoming):
            return False
        self._background.take()
        before = host.transcript
        tokens_before = host.engine.current_tokens(before)
        new = catch_up(proposal, before)
        if new is None:
            return await self._drop(proposal, "transcript_changed")
        if proposal.kind == "upgrade":
            return await self._commit_upgrade(proposal, new)
        reason: CompactionReason = "threshold"
        self._emit(CompactionBegan(session_id=host.session_id, reason=reason))
        if proposal.kind == "batch":
            new = await self._with_ledger(new)  # standing instructions stay in the head
            if self._with_memory is not None:  # facts kept, then the profile renewed
                new = await self._with_memory(new, proposal.result)
        try:
            await host.commit_compaction(
                new, kind=proposal.kind, expected_version=host.known_version
            )
        except ConcurrentModification:  # the host reloaded the stored set
            return await self._drop(proposal, "session_changed")
        except Exception as exc:  # adoption is best effort: the turn goes on either way
            log.warning(
                "proposal_not_stored", session_id=host.session_id, error_type=type(exc).__name__
            )
            return await self._drop(proposal, "store_failed")
        if proposal.result is not None:
            host.engine.adopt(proposal.result)
            host.last_usage = None
        if proposal.on_adopted is not None:
            await proposal.on_adopted(new)
        self._emit(
            CompactionCommitted(
                session_id=host.session_id,
                reason=reason,
                kind=proposal.kind,
                messages_before=len(before),
                messages_after=len(new),
                tokens_before=tokens_before,
                tokens_after=host.engine.current_tokens(new),
                seconds=proposal.result.duration_ms / 1000 if proposal.result else 0.0,
            )
        )
        return True

    async def _commit_upgrade(self, proposal: Proposal, new: list[ChatMessage]) -> bool:
        """A stopgap's summary replaced by the model's: one transaction that archives the
        stopgap's marker row and inserts the new one; no compaction is counted."""
        host = self._host
        try:
            await host.commit_compaction(new, kind=None, expected_version=host.known_version)
        except ConcurrentModification:
            return await self._drop(proposal, "session_changed")
        except Exception as exc:  # best effort: the stopgap summary stays
            log.warning(
                "proposal_not_stored", session_id=host.session_id, error_type=type(exc).__name__
            )
            return await self._drop(proposal, "store_failed")
        host.last_usage = None
        if proposal.on_adopted is not None:
            await proposal.on_adopted(new)
        return True

    async def drop_proposal(self) -> None:
        """The agent leaves memory without another turn: what background work proposed goes
        (its work is redone when the session comes back)."""
        proposal = self._background.take()
        if proposal is not None:
            await self._drop(proposal, "agent_evicted")

    def _batch_due(self, incoming: str) -> bool:
        host = self._host
        last, ttl = host.last_request_at, cache_ttl_seconds(host.cache_ttl)
        cold = ttl is None or last is None or host.now() - last > ttl
        return should_adopt_batch(
            tokens=host.engine.current_tokens(host.transcript),
            incoming_tokens=estimate_tokens_rough(incoming),
            growth=host.growth,
            threshold_tokens=host.engine.threshold_tokens,
            cache_cold=cold,
            context_length=host.engine.context_length,
        )

    async def _drop(self, proposal: Proposal, why: str) -> bool:
        log.info("proposal_dropped", session_id=self._host.session_id, kind=proposal.kind, why=why)
        if proposal.on_dropped is not None:
            await proposal.on_dropped(why)
        return False
