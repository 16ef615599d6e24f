"""One session's work off the turn's path: scheduled after a reply, it proposes, it never waits.

`finalize_turn` hands the session to `BackgroundWork.schedule`: the first `EndOfTurnWork` that
wants to run (a batch compaction prepared ahead of the threshold, else a micro-compaction pass)
starts in a task, at once or after its delay (until the prompt cache has gone cold). It works
from a snapshot and returns a `Proposal`, which waits here until the agent adopts it at a turn
boundary (see `agent.proposals`). A new turn cancels work that is still waiting (it would have
been free only while the cache was cold) and never waits for work that is running.

On a model server that answers one request at a time (`agent.server_slot`), work runs only in
the idle gaps between user turns: a turn that begins anywhere in the runtime cancels the run
that holds the server, and the work starts over (its choice made again, from the transcript as
it then is) once no turn is in progress. A cancelled run loses nothing: it never wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import structlog

from agent.compaction.speculation import Growth
from agent.messages import ChatMessage
from agent.proposals import Proposal
from agent.server_slot import ServerSlot

if TYPE_CHECKING:
    from agent.context_engine import ContextEngine
    from state.contract import AgentStore

__all__ = ["BackgroundWork", "EndOfTurnWork", "SessionView"]

log = structlog.get_logger(__name__)


class SessionView(Protocol):
    """What end-of-turn work may read of a session's agent (`AIAgent` provides it)."""

    @property
    def session_id(self) -> str: ...

    @property
    def transcript(self) -> list[ChatMessage]:
        """The live transcript: copy it before awaiting, a turn may append meanwhile."""
        ...

    @property
    def engine(self) -> ContextEngine: ...

    @property
    def store(self) -> AgentStore: ...

    @property
    def known_version(self) -> int | None:
        """The session version the transcript reflects (None: unknown)."""
        ...

    @property
    def last_request_at(self) -> float | None:
        """When the last model call happened (how warm the prompt cache is)."""
        ...

    @property
    def cache_ttl(self) -> str | None: ...

    @property
    def growth(self) -> Growth:
        """Tokens a turn of this session adds, on average."""
        ...

    def now(self) -> float:
        """The agent's clock (simulated in the replay)."""
        ...


class EndOfTurnWork(Protocol):
    """Work the agent runs after the reply is out (micro-compaction, prepared compaction)."""

    def delay_s(self, session: SessionView) -> float | None:
        """Seconds to wait before running (None: not this turn). A turn that arrives during
        the wait cancels the work; once it runs, it runs to the end beside any turn."""
        ...

    async def __call__(self, session: SessionView) -> Proposal | None:
        """Do the work from a snapshot; what it proposes is adopted at a turn boundary."""
        ...

    def forget_session(self, session_id: str) -> None:
        """The session's agent left memory (or reloaded): drop per-session state; it is read
        from the session's meta again when needed."""
        ...


class BackgroundWork:
    """The background slot of one agent: at most one piece of work, and at most one proposal."""

    def __init__(
        self,
        session: SessionView,
        works: tuple[EndOfTurnWork, ...],
        *,
        sleep: Callable[[float], Awaitable[None]],
        slot: ServerSlot | None = None,
    ) -> None:
        self._session = session
        self._works = works
        self._sleep = sleep
        self._slot = slot or ServerSlot()
        self._task: asyncio.Task[None] | None = None
        self._waiting = False
        self._ready: Proposal | None = None

    # ---- what the agent asks ----------------------------------------------------------------

    @property
    def ready(self) -> Proposal | None:
        """A proposal waiting to be adopted."""
        return self._ready

    @property
    def is_waiting(self) -> bool:
        """Work is scheduled but still waiting for its moment (cancelling it loses nothing)."""
        return self._waiting and self.is_running

    @property
    def is_running(self) -> bool:
        return self._task is not None and not self._task.done()

    def is_idle(self) -> bool:
        """Nothing in flight and nothing proposed."""
        return not self.is_running and self._ready is None

    def schedule(self) -> None:
        """After a reply: start the first work that wants to run, unless one is in flight or a
        proposal is still to be adopted (one at a time keeps every proposal valid)."""
        if self.is_running or self._ready is not None:
            return
        picked = self._pick()
        if picked is not None:
            work, delay = picked
            self._waiting = delay > 0
            self._task = asyncio.create_task(
                self._run(work, delay), name=f"end-of-turn:{self._session.session_id}"
            )

    def _pick(self) -> tuple[EndOfTurnWork, float] | None:
        for work in self._works:
            delay = work.delay_s(self._session)
            if delay is not None:
                return work, delay
        return None

    def take(self) -> Proposal | None:
        """Hand the ready proposal over (to be adopted or dropped); the slot is free again."""
        proposal, self._ready = self._ready, None
        return proposal

    def cancel_waiting(self) -> None:
        """A turn begins: work still waiting for a cold cache will not get one; drop it."""
        if self.is_waiting and self._task is not None:
            self._task.cancel()
            self._waiting = False

    async def settle(self) -> None:
        """Cancel waiting work and let running work finish (shutdown, `/compress`, tests).
        On a single-slot server during a user turn, running work is cancelled too: it would
        wait for the turn to end, and the turn would wait for it.

        Raises nothing of the work's (a failure was logged where it failed), but the caller's
        own cancellation goes on up: a deadline around this fires, and running work goes on."""
        task = self._task
        if task is None:
            return
        if self.is_waiting or (self._slot.yields and self._slot.turn_in_progress):
            task.cancel()
        # Not `await task`: its CancelledError would be indistinguishable from the caller's.
        # `wait` never cancels the task and raises only when the caller itself is cancelled.
        await asyncio.wait({task})

    async def stop(self) -> None:
        """Cancel the work, running or waiting (a turn that cannot wait for it): it never
        wrote, so nothing is lost; the next reply chooses again."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})

    async def forget(self) -> None:
        """The transcript was reloaded: a proposal made from the old one is void."""
        proposal = self.take()
        if proposal is not None and proposal.on_dropped is not None:
            await proposal.on_dropped("session_reloaded")

    # ---- the task -----------------------------------------------------------------------

    async def _run(self, work: EndOfTurnWork, delay: float) -> None:
        try:
            proposal = await self._until_done(work, delay)
        except asyncio.CancelledError:
            raise
        except Exception:  # a task root: end-of-turn work never breaks a session
            log.exception("end_of_turn_failed", session_id=self._session.session_id)
            return
        finally:
            self._waiting = False
        if proposal is not None:
            self._ready = proposal

    async def _until_done(self, work: EndOfTurnWork, delay: float) -> Proposal | None:
        """Wait for the work's moment and for an idle server, then run it; when a user turn
        cancels the run, choose again once the server is idle and start over."""
        while True:
            if delay > 0:
                self._waiting = True
                await self._sleep(delay)  # e.g. until the prompt cache has gone cold
            self._waiting = False
            await self._slot.wait_idle()  # a single-slot server: only between user turns
            attempt = asyncio.create_task(
                work(self._session), name=f"end-of-turn:{self._session.session_id}"
            )
            try:
                with self._slot.holding(attempt):
                    await asyncio.wait({attempt})
            except asyncio.CancelledError:
                attempt.cancel()
                raise
            if not attempt.cancelled():
                return attempt.result()
            log.info("end_of_turn_yielded", session_id=self._session.session_id)
            await self._slot.wait_idle()
            picked = self._pick()
            if picked is None:
                return None
            work, delay = picked
