"""`AIAgent`: one session's turn loop: persist, maybe compact, call the model, run tools, repeat.

Several workers may serve one session, so the store is the truth: the agent counts its own
writes (each moves the session's version by one) and, holding the session's lock, starts a turn
from the stored active set whenever the version moved past what it saw (`sync_with_store`).
Compactions commit with `expected_version`; a conflict discards the result and reloads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, assert_never

import structlog

from agent.access import Principal, TurnAccess
from agent.adoption import ProposalAdopter
from agent.background import BackgroundWork, EndOfTurnWork
from agent.client_tools import admit, pending_calls
from agent.compaction.markers import find_newest_marker
from agent.compaction.speculation import Growth
from agent.compaction.threshold import reply_reserve, request_max_tokens, would_overflow
from agent.deps import AgentDeps, TurnResult
from agent.engine_tools import grant_engine_tools, session_tools
from agent.errors import (
    CompactionRefused,
    ConcurrentModification,
    ContextTooLong,
    StoreError,
    TurnLimitReached,
)
from agent.events import (
    AgentEvent,
    CompactionBegan,
    CompactionCommitted,
    EngineSwitched,
    ModelSwitched,
    NativeCompaction,
    SessionReloaded,
)
from agent.ledger.keeper import LedgerKeeper
from agent.memory.memory_keeper import MemoryKeeper
from agent.messages import ChatMessage, content_text, system_message
from agent.providers.base import OnText, ProviderReply, Usage
from agent.redaction import redact_message
from agent.session_meta import parse_meta
from agent.stopgap import StopgapUpgrade
from agent.tokens import estimate_tool_specs_tokens
from agent.tools.approval import SessionApprovals
from agent.turn import (
    FAILED_TOOL_RESULT,
    CallTools,
    Finish,
    build_request,
    close_interrupted,
    decide,
    failed_mark,
    incoming_messages,
    is_unchanged,
    unpersisted,
)
from agent.turn_options import TurnOptions, TurnState
from agent.turn_tools import run_tool_calls
from state.contract import AgentStore, CompactionKind
from state.values import SessionInfo

if TYPE_CHECKING:
    from agent.context_engine import CompactionReason, CompressResult, ContextEngine

__all__ = ["AIAgent", "AgentDeps", "EndOfTurnWork", "TurnResult"]  # values re-exported

log = structlog.get_logger(__name__)


class AIAgent:
    """The turn loop of one session. Not shared between tasks: the gateway runs one turn at a time."""

    def __init__(
        self,
        deps: AgentDeps,
        *,
        session_id: str,
        model: str,
        context_length: int,
        transcript: list[ChatMessage],
        version: int | None = None,
    ) -> None:
        self.deps = deps
        self.session_id = session_id
        self.model = model
        self.transcript = transcript
        self.known_version = version
        """The session version `transcript` reflects, own writes counted; None: unknown (the
        next `sync_with_store` reloads, and compactions commit unchecked)."""
        self.engine = deps.engine_factory()
        self.engine.update_model(model, context_length)
        self.tools = session_tools(deps.tools, self.engine)
        """The runtime's tools plus the active engine's own (e.g. `lcm_grep`) for this session."""
        self.last_usage: Usage | None = None
        self._schema_tokens = 0  # rough tokens of the tool schemas the last request offered
        self.last_request_at: float | None = None
        """Monotonic time of the last model call: how warm the prompt cache is."""
        self.growth = Growth()
        """Tokens a turn of this session adds, on average (when to prepare a compaction)."""
        self.stopgap = StopgapUpgrade()  # first: a stopgap summary's model upgrade
        works = (self.stopgap, *deps.end_of_turn)
        self._background = BackgroundWork(self, works, sleep=deps.sleep, slot=deps.server_slot)
        self.approvals = SessionApprovals()
        """Requests answered "Always for this session" (this process only)."""
        self.instructions = LedgerKeeper(self)
        """Standing instructions: `/pin`, `/unpin`, those noticed in what the user says."""
        self.memory = MemoryKeeper(self, deps.memory, deps.config.memory)  # its person's
        self.proposals = ProposalAdopter(
            self,
            self._background,
            with_ledger=self.instructions.with_ledger,
            with_memory=self.memory.renewed,
            emit=self._emit,
        )
        """Adopts what background work proposed, at a turn boundary (`proposals.adopt_ready`)."""

    @classmethod
    async def open(
        cls, deps: AgentDeps, *, session_id: str, model: str, context_length: int
    ) -> AIAgent:
        """Load the session's active transcript (hold the session's lock); a new session gets
        its system prompt first."""
        info = await deps.store.sessions.get_session(session_id)
        transcript = await deps.store.transcript.load_active(session_id)
        version = None if info is None else info.version
        if not transcript:
            transcript = [system_message(deps.config.agent.system_prompt)]
            await deps.store.transcript.append(session_id, transcript)
            version = None if version is None else version + 1
        return cls(
            deps,
            session_id=session_id,
            model=model,
            context_length=context_length,
            transcript=transcript,
            version=version,
        )

    async def sync_with_store(self, info: SessionInfo | None = None) -> bool:
        """Adopt the stored session if another worker (or the CLI) changed it since this agent
        last saw it: its active set when the version moved, its model when `/model` ran there.

        Call it holding the session's lock, with the session as just read (or None to read it).
        Returns whether the transcript was reloaded.
        """
        info = info or await self.deps.store.sessions.get_session(self.session_id)
        if info is None:
            raise StoreError(f"no session {self.session_id!r}")
        stored_model = parse_meta(info.meta).model
        if stored_model and stored_model != self.model:
            from agent.providers.context_window import context_length_for

            window = context_length_for(stored_model, None) or self.engine.context_length
            self.switch_model(stored_model, window)
        if info.version == self.known_version:
            return False
        seen = self.known_version
        await self._reload(info)
        log.info(
            "session_reloaded",
            session_id=self.session_id,
            seen_version=seen,
            version=info.version,
            messages=len(self.transcript),
        )
        self._emit(SessionReloaded(session_id=self.session_id, version=info.version))
        return True

    async def commit_compaction(
        self,
        messages: list[ChatMessage],
        *,
        kind: CompactionKind | None,
        expected_version: int | None,
    ) -> None:
        """Make `messages` (computed from the session at `expected_version`) the active set;
        `kind` counts it as a compaction (None: a rewrite of the head, counted as none).

        Raises ConcurrentModification when the session moved since, having reloaded the stored
        set (the store changed nothing).
        """
        try:
            await self.deps.store.transcript.archive_and_compact(
                self.session_id, messages, expected_version=expected_version, kind=kind
            )
        except ConcurrentModification:
            await self._reload(None)
            raise
        except asyncio.CancelledError:
            # The store commits all or nothing; adopt whichever side of it we ended on.
            await self._reload(None)
            raise
        self.transcript = messages
        self.known_version = None if expected_version is None else expected_version + 1

    # ---- the turn -------------------------------------------------------------------------

    async def run_turn(
        self,
        said: str | Sequence[ChatMessage],
        *,
        on_text: OnText | None = None,
        access: TurnAccess | None = None,
        options: TurnOptions | None = None,
    ) -> TurnResult:
        """Answer what the user `said` (their text, or the turn's new messages: user messages,
        tool results) for `access.principal` (default: the local operator, with the runtime's
        approver), with the caller's per-turn `options`.

        A turn is a transaction of intent: the new messages join the transcript once they are
        stored, so a turn that fails before that leaves the session exactly as it was. A turn
        that fails later keeps what was stored and ends with a marked assistant message
        (`failed_mark`), so the next request alternates roles and pairs every tool call.
        Raises TurnRefused, storing nothing, when the new messages cannot continue the session
        (tool results for calls nobody made: `agent.client_tools.admit`).
        Everything that enters the transcript passes the redactor first, so no secret reaches
        the store, a summary or a later model call."""
        with self.deps.server_slot.user_turn():  # background work gives way (single slot)
            return await self._run_turn(said, on_text, access, options)

    async def _run_turn(
        self,
        said: str | Sequence[ChatMessage],
        on_text: OnText | None,
        access: TurnAccess | None,
        options: TurnOptions | None,
    ) -> TurnResult:
        new = admit(self.transcript, incoming_messages(said))
        access = grant_engine_tools(access or self._operator_access(), self.tools, self.deps.tools)
        self._background.cancel_waiting()  # a turn never waits for background work
        await self.proposals.adopt_ready(incoming="".join(content_text(m) for m in new))
        await self.memory.open_session(new)  # a session's first message: no cache to break
        await self._store_intent(new)
        state = TurnState(options=options or TurnOptions())
        try:
            return await self._turn_steps(state, on_text, access)
        except asyncio.CancelledError:
            await self._close_turn(state.streamed)
            raise
        except StoreError:
            self._forget_unstored()  # the store is the truth: the next turn starts from it
            raise
        except Exception as exc:
            await self._close_turn(state.streamed or getattr(exc, "partial", ""), exc)
            raise

    async def _store_intent(self, new: list[ChatMessage]) -> None:
        """Store what the transcript still owes the store and the turn's new messages, in one
        write; only then do they join the transcript."""
        owed = unpersisted(self.transcript)
        try:
            await self.deps.store.transcript.append(self.session_id, [*owed, *new])
        except BaseException:
            self._forget_unstored()
            raise
        self._count_own_write()
        self.transcript.extend(new)
        for message in new:
            await self.memory.offer(await self.instructions.note(message))

    def _forget_unstored(self) -> None:
        """Drop what the store may not hold and reload from it at the next turn (a write that
        timed out may have committed after all)."""
        self.transcript = [m for m in self.transcript if m.get("_persisted")]
        self.known_version = None

    async def _turn_steps(
        self, state: TurnState, on_text: OnText | None, access: TurnAccess
    ) -> TurnResult:
        limit = self.deps.config.agent.max_iterations

        async def collect(delta: str) -> None:
            state.streamed += delta  # kept if the user stops the turn mid-reply
            if on_text is not None:
                await on_text(delta)

        for step in range(limit):
            if step and state.options.steer is not None and (more := state.options.steer()):
                await self._store_intent([m for t in more for m in incoming_messages(t)])
            state.streamed = ""
            reply = await self._call_model(state, collect if on_text else None, access.principal)
            self.transcript.append(redact_message(reply.message))
            await self.persist(usage=reply.usage)
            match decide(reply):
                case Finish(message=message, truncated=truncated):
                    return TurnResult(
                        reply=content_text(message),
                        session_id=self.session_id,
                        usage=state.usage,
                        model_calls=state.calls,
                        compacted=state.compacted,
                        truncated=truncated,
                    )
                case CallTools(message=message, calls=calls) if state.options.proxies_tools:
                    return TurnResult(  # the caller runs its tools and sends the results
                        reply=content_text(message),
                        session_id=self.session_id,
                        usage=state.usage,
                        model_calls=state.calls,
                        compacted=state.compacted,
                        tool_calls=calls,
                    )
                case CallTools(calls=calls):
                    self.transcript.extend(await run_tool_calls(self, calls, access))
                    await self.persist()
                case unreachable:
                    assert_never(unreachable)
        raise TurnLimitReached(self.session_id, steps=limit)

    async def _close_turn(self, streamed: str, failure: Exception | None = None) -> None:
        """End a turn the user stopped (`failure` None) or that failed after the user's words
        were stored: keep what streamed, answer open tool calls, mark it and store it (the store
        settles a write a cancel cut into), so the session stays well-formed."""
        kind = None if failure is None else getattr(failure, "kind", None) or type(failure).__name__
        closing = (
            close_interrupted(self.transcript, streamed)
            if kind is None
            else close_interrupted(
                self.transcript,
                streamed,
                mark=failed_mark(str(kind)),
                tool_result=FAILED_TOOL_RESULT,
            )
        )
        self.transcript.extend(redact_message(m) for m in closing)
        try:
            await asyncio.shield(self.persist())
        except Exception as store_exc:  # the next turn's write (or a reload) settles it
            if failure is not None:
                self._forget_unstored()  # the store fails too: start from it at the next turn
            event = "interrupted_turn_not_stored" if failure is None else "failed_turn_not_closed"
            log.warning(event, session_id=self.session_id, error_type=type(store_exc).__name__)
        if failure is None:
            log.info("turn_interrupted", session_id=self.session_id, streamed_chars=len(streamed))
        else:
            log.info("turn_failed", session_id=self.session_id, error_type=type(failure).__name__)

    async def finalize_turn(self) -> None:
        """The single place for end-of-turn work. Call it after the reply reached the user.
        The work runs in the background, now or after its delay, from a snapshot; what it
        proposes is adopted at the next turn boundary (`proposals.adopt_ready`). The next turn
        cancels work still waiting and never waits for work already running."""
        self.growth = self.growth.after_turn(self.engine.current_tokens(self.transcript))
        if pending_calls(self.transcript):
            return  # the caller's tool results come next: nothing may cut between call and result
        self._background.schedule()

    async def wait_background(self) -> None:
        """Settle end-of-turn work: cancel it while it still waits, else wait for it to end.
        Its proposal (if any) then waits for `proposals.adopt_ready`. Never raises."""
        await self._background.settle()

    async def compress(
        self, *, focus: str | None = None, reason: CompactionReason = "manual"
    ) -> CompressResult:
        """Compact now (e.g. `/compress`); raises CompactionRefused with the reason."""
        await self.wait_background()
        await self.proposals.adopt_ready(force=True)
        return await self._compact(focus=focus, reason=reason)

    @property
    def background_waiting(self) -> bool:
        """End-of-turn work is scheduled but still waiting for its moment (e.g. a cold cache)."""
        return self._background.is_waiting

    def is_idle(self) -> bool:
        """No end-of-turn work in flight (a proposal may still wait to be adopted)."""
        return not self._background.is_running

    # ---- what end-of-turn work reads (`agent.background.SessionView`) ----------------------

    @property
    def store(self) -> AgentStore:
        return self.deps.store

    @property
    def cache_ttl(self) -> str | None:
        return self.deps.cache_ttl

    def now(self) -> float:
        return self.deps.clock()

    def switch_model(self, model: str, context_length: int) -> None:
        """Use another model from the next call on; its prompt cache starts cold."""
        self.model = model
        self.engine.update_model(model, context_length)
        self.last_usage = None
        self._emit(ModelSwitched(model=model, context_length=context_length))

    def use_engine(self, engine: ContextEngine) -> None:
        """Switch this session to another context engine: its tools replace the old engine's."""
        tools = session_tools(self.deps.tools, engine)
        engine.update_model(self.model, self.engine.context_length)
        self.engine, self.tools = engine, tools
        self._emit(EngineSwitched(session_id=self.session_id, engine=engine.name))

    # ---- steps ----------------------------------------------------------------------------

    def _operator_access(self) -> TurnAccess:
        approver = self.deps.tool_context.approver
        principal = Principal.operator(self.tools.names(), can_approve=approver is not None)
        return TurnAccess(principal=principal, approver=approver)

    async def _call_model(
        self, state: TurnState, on_text: OnText | None, principal: Principal
    ) -> ProviderReply:
        tools = state.options.client_tools
        offered = self.tools.offered(principal, self.transcript) if tools is None else tools
        self._schema_tokens = estimate_tool_specs_tokens(offered)
        compacted = False
        if self.engine.should_compress(self.transcript):
            # A compaction prepared in the background is swapped in for free; without one the
            # turn carries on past the threshold (one is prepared after the reply) unless the
            # request would not fit at all: only then does compaction block the user.
            compacted = await self.proposals.adopt_ready(force=True)
        if not compacted and self._would_overflow():
            compacted = await self.make_room("context_too_long")
        state.compacted |= compacted
        options = state.options
        provider = options.provider or self.deps.provider
        while True:
            offered = self.tools.offered(principal, self.transcript) if tools is None else tools
            self._schema_tokens = estimate_tool_specs_tokens(offered)
            request = build_request(
                self.transcript,
                model=options.model or self.model,
                tools=offered,
                max_tokens=request_max_tokens(
                    self.deps.config.model.max_tokens,
                    self.engine.context_length,
                    self._prompt_tokens(),
                ),
                cache_ttl=self.deps.cache_ttl,
                cache_blocks_only=self.deps.cache_blocks_only,
                call=options.call,
            )
            try:
                # Providers retry transient failures themselves (bounded, honouring retry-after).
                reply = await provider.complete(request, on_text=on_text)
            except ContextTooLong as exc:
                if state.retried_too_long:
                    raise  # made room once for this call and it still does not fit
                state.retried_too_long = True
                await self._make_room(exc, request.messages)
                state.compacted = True
                continue
            state.retried_too_long = False  # the next step of the turn may make room again
            break
        self.last_request_at = self.deps.clock()
        state.calls += 1
        state.usage = state.usage + reply.usage
        self.last_usage = reply.usage
        self.engine.update_from_usage(reply.usage, request.messages)
        return reply

    def _would_overflow(self, *, reserve: bool = True) -> bool:
        """The next request would not leave the reply its reserve (without: a minimal reply)."""
        window, model = self.engine.context_length, self.deps.config.model
        room = reply_reserve(window, model.max_tokens, model.reply_reserve_tokens) if reserve else 0
        return would_overflow(window, self._prompt_tokens(), room)

    def _prompt_tokens(self) -> int:
        """A provider's report counts the tool schemas; an estimate (after a compaction) adds them."""
        fixed = 0 if self.last_usage is not None else self._schema_tokens
        return self.engine.current_tokens(self.transcript) + fixed

    async def _make_room(self, refused: ContextTooLong, sent: list[ChatMessage]) -> None:
        """The provider refused the prompt as too long: learn what it said about the window,
        then compact, degrading as far as needed.

        Raises ContextTooLong with one sentence saying what does not fit when nothing can help.
        """
        counted = refused.prompt_tokens  # the server's count includes the tool schemas
        learned = self.engine.learn_from_overflow(
            window_tokens=refused.window_tokens,
            prompt_tokens=max(1, counted - self._schema_tokens) if counted else counted,
            messages_sent=sent,
        )
        if learned is not None and self.deps.on_window_learned is not None:
            self.deps.on_window_learned(self.model, learned)
        if not self._would_overflow():
            return  # with what the server said, it fits, the reply's reserve included
        try:
            await self._compact(focus=None, reason="context_too_long")
        except CompactionRefused as exc:
            log.info("compaction_refused", session_id=self.session_id, reason=exc.reason)
            if self._would_overflow(reserve=False):  # else it fits with a shorter reply budget
                raise ContextTooLong(refused.provider, refused.model, exc.reason) from refused

    async def make_room(self, reason: CompactionReason) -> bool:
        """Compact on the user's path (a request that would not fit, hygiene before a turn),
        never waiting: background work is stopped (it never wrote), a ready proposal adopted,
        and if still needed the stopgap stands in for a summary that follows in an idle gap
        (the in-turn batch baseline waits for it). Returns whether the session was compacted."""
        with self.deps.server_slot.user_turn():  # background work gives way (single slot)
            await self._background.stop()
            adopted = await self.proposals.adopt_ready(force=True)
            if adopted and (reason == "hygiene" or not self._would_overflow()):
                return True
            stopgap = self.deps.config.compression.speculative  # `agent.stopgap`
            try:
                await self._compact(focus=None, reason=reason, stopgap=stopgap)
            except CompactionRefused as exc:
                log.info("compaction_refused", session_id=self.session_id, reason=exc.reason)
                return adopted
            return True

    async def _compact(
        self, *, focus: str | None, reason: CompactionReason, stopgap: bool = False
    ) -> CompressResult:
        await self.persist()  # the store must hold everything the compaction replaces
        self._emit(CompactionBegan(session_id=self.session_id, reason=reason))
        # Prepared, not yet counted by the engine: a result the store refuses is discarded.
        snapshot = list(self.transcript)
        result = await self.engine.prepare_stopgap(snapshot, reason=reason) if stopgap else None
        result = result or await self.engine.prepare(snapshot, focus=focus, reason=reason)
        if is_unchanged(result.messages, self.transcript):
            # The engine compacted elsewhere (e.g. the Codex app-server's own thread): the local
            # transcript is never rewritten; only the count moves.
            self.engine.adopt(result)
            await self.deps.store.meta.record_compaction(self.session_id, kind="native")
            self._count_own_write()
            self._emit(NativeCompaction(session_id=self.session_id, reason=reason))
            return result
        head = await self.instructions.with_ledger(result.messages)
        result = replace(result, messages=await self.memory.renewed(head, result))
        old_session_id = ""
        if self.deps.config.compression.in_place:
            try:
                await self.commit_compaction(
                    result.messages, kind="batch", expected_version=self.known_version
                )
            except ConcurrentModification as exc:  # reloaded the stored set
                raise CompactionRefused(
                    "another worker changed the session meanwhile; reloaded it"
                ) from exc
        else:
            old_session_id = self.session_id
            try:
                rotated = await self.deps.store.transcript.rotate(self.session_id, result.messages)
            except asyncio.CancelledError:
                await self._reload(None)
                raise
            self.session_id, self.known_version = rotated.id, rotated.version
            await self.deps.store.meta.record_compaction(self.session_id, kind="batch")
            self._count_own_write()
            self.transcript = result.messages
        self.engine.adopt(result)
        self.last_usage = None
        if result.upgrade is not None and (newest := find_newest_marker(self.transcript)):
            self.stopgap.offer(self.transcript[newest[0]], result.upgrade, self.engine)
        self._emit(
            CompactionCommitted(
                session_id=self.session_id,
                old_session_id=old_session_id,
                reason=reason,
                kind="batch",
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                messages_before=result.messages_before,
                messages_after=result.messages_after,
                seconds=result.duration_ms / 1000,
            )
        )
        return result

    async def persist(self, *, usage: Usage | None = None) -> None:
        """Store what is new; a model call's usage rides along in the same write."""
        pending = unpersisted(self.transcript)
        if pending or usage is not None:
            await self.deps.store.transcript.append(self.session_id, pending, usage=usage)
            self._count_own_write()

    def _count_own_write(self) -> None:
        if self.known_version is not None:
            self.known_version += 1

    async def _reload(self, info: SessionInfo | None) -> None:
        """Start over from the stored active set (holding the session's lock)."""
        store = self.deps.store
        info = info or await store.sessions.get_session(self.session_id)
        self.transcript = await store.transcript.load_active(self.session_id)
        self.known_version = None if info is None else info.version
        self.last_usage = None
        self.growth = Growth()
        await self._background.forget()
        self.stopgap.forget_session(self.session_id)
        for work in self.deps.end_of_turn:
            work.forget_session(self.session_id)  # its cached state described the old set

    def _emit(self, event: AgentEvent) -> None:
        if self.deps.on_event is not None:
            self.deps.on_event(event)
