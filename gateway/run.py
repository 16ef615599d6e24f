"""The one runner every platform feeds: chat → session, one turn at a time, hygiene, reply.

Adapters call `deliver` (which only enqueues). Each conversation has a lane: a queue worked by
one task, so its turns run in order and a message sent mid-turn waits its turn; different
conversations run concurrently and share nothing but the runtime.

Several workers may share the store, so a turn holds the session's lock across processes
(`SessionLocks.lock_session`; the user hears "busy, queued" when it must wait), checks the
chat's route against the store (another worker may have run `/new`), and lets a cached agent
catch up with what other workers wrote (`AIAgent.sync_with_store`) before it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeAlias, assert_never

import structlog

from agent.access import ApprovalAnswer, ApprovalRequest, Approver, TurnAccess
from agent.errors import (
    HermesError,
    MediaRefused,
    MessageTooLong,
    ProviderError,
    SessionBusy,
    TurnLimitReached,
    TurnRefused,
)
from agent.providers.base import Usage
from agent.turn_options import TurnOptions
from gateway.agent_source import AgentSource
from gateway.command_actions import CommandEffect, Compacted, Rerouted, run_command
from gateway.commands import Command, parse_command
from gateway.failures import failure_sentence, turn_failure_sentence
from gateway.hygiene import run_hygiene
from gateway.intake import check_length, refuse_stranger
from gateway.lanes import Item, Lane, finish_by
from gateway.media_intake import MediaIntake, said_of
from gateway.metrics import NO_METRICS, MetricsRecorder, QueueDepth, TurnDone, TurnKind
from gateway.platforms.base import ApprovalChannel, InboundMessage, PlatformAdapter
from gateway.principals import may_answer_approvals, may_continue, read_scope, resolve_principal
from gateway.receipts import note_compaction, receipt_mode, send_receipt
from gateway.reply import PlatformReplySink, ReplySink
from gateway.routing import chat_key, memory_owner
from gateway.steering import Steering, after_steering, steer_inbox, stopped
from gateway.take_back import take_back
from state import Lease, SessionInfo, SessionStore

if TYPE_CHECKING:
    from agent.agent import AIAgent
    from agent.deps import TurnResult
    from agent.messages import ChatMessage

__all__ = ["AgentSource", "GatewayRunner", "TurnOutcome"]

log = structlog.get_logger(__name__)

MAX_CACHED_AGENTS = 128
"""Idle sessions beyond this are dropped from memory and reloaded from the store when needed."""
MAX_CACHED_ROUTES = 4096
"""Chat -> session routes kept in memory; older ones are asked of the store again."""
COMPACTED_NOTICE = (
    "🗜️ Older context was compacted to keep this conversation within the model's window."
)
BUSY_NOTICE = "⏳ Busy with another message of this conversation; yours is queued."
MAX_REROUTES = 3
"""A chat whose session another worker ended is re-routed from the store at most this often."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOutcome:
    """What one inbound message produced."""

    reply: str
    session_id: str
    usage: Usage | None = None
    """Summed over the turn's model calls; None for commands."""
    compacted: bool = False
    """Session hygiene compacted older context before this turn."""
    busy: bool = False
    """Not run: another worker kept the session busy past `state.lock_timeout_s`."""
    kind: TurnKind = "reply"
    model: str | None = None
    """The session's model, which prices `usage` (None for commands and failures)."""
    interrupted: bool = False
    """Stopped by `GatewayRunner.interrupt`; what had streamed is kept, marked interrupted."""
    command: str | None = None
    """The chat command that answered (e.g. "resume"); None for a turn of the agent."""
    turn: TurnResult | None = None
    """The agent's own account of the turn (model calls, truncation); None for commands."""
    error: HermesError | None = None
    """What failed: the provider failure or turn limit the reply reports, or the runtime's
    error a failed turn ended on (None with kind "failed": an unexpected exception)."""


_Item: TypeAlias = Item[TurnOutcome]
_Lane: TypeAlias = Lane[TurnOutcome]


class GatewayRunner:
    """Routes inbound messages to sessions and runs their turns."""

    def __init__(
        self,
        source: AgentSource,
        adapters: list[PlatformAdapter] | None = None,
        *,
        metrics: MetricsRecorder = NO_METRICS,
    ) -> None:
        self.source = source
        self.metrics = metrics
        self._waiting: Counter[str] = Counter()
        """Messages queued per platform, not yet started (the queue-depth metric)."""
        self.config = source.config
        self.memory = source.memory
        self.adapters = {a.name: a for a in adapters or []}
        self._lanes: dict[str, _Lane] = {}
        self._agents: OrderedDict[str, AIAgent] = OrderedDict()
        self._session_locks: dict[str, asyncio.Lock] = {}
        self._routes: OrderedDict[str, str] = OrderedDict()
        """Lane key -> session id, so a busy chat does not ask the store on every message."""
        self._accepting = True
        self._steering = Steering(self.config.gateway.busy)
        self.media_intake: MediaIntake | None = getattr(source, "media_intake", None)

    # ---- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        started: list[PlatformAdapter] = []
        try:
            for adapter in self.adapters.values():
                await adapter.start(self.deliver)
                started.append(adapter)
        except BaseException:
            for adapter in reversed(started):
                await adapter.stop()
            raise

    async def stop(self, *, timeout_s: float | None = None) -> None:
        """Stop intake, let turns in flight and queued ones finish, then let every agent's
        background work end (side by side); all of it within one `timeout_s`
        (`gateway.shutdown_timeout_s`: docs/deploy.md gives a hard kill 15 s after it)."""
        self._accepting = False
        for adapter in self.adapters.values():
            with contextlib.suppress(Exception):
                await adapter.stop()
        workers = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        limit = self.config.gateway.shutdown_timeout_s if timeout_s is None else timeout_s
        deadline = asyncio.get_running_loop().time() + limit
        await finish_by(deadline, workers)
        settling = [asyncio.create_task(self._settle(a, limit)) for a in self._agents.values()]
        await finish_by(deadline, settling)

    async def _settle(self, agent: AIAgent, limit: float) -> None:
        """Let an agent's background work end and keep what it proposed (shutdown); a failure
        here only loses the proposal (it never wrote)."""
        with contextlib.suppress(Exception):
            await agent.wait_background()
            async with self._lock(agent.session_id):
                async with self.store.locks.lock_session(agent.session_id, timeout_s=limit):
                    await agent.proposals.adopt_ready()

    # ---- intake -------------------------------------------------------------------------

    async def deliver(self, message: InboundMessage) -> None:
        """The adapters' intake: refuse strangers, else queue on the conversation's lane."""
        adapter = self.adapters.get(message.chat.platform)
        channel = adapter if isinstance(adapter, ApprovalChannel) else None
        principal = resolve_principal(
            message, self.config, has_approval_channel=channel is not None
        )
        if principal is None:
            log.info("user_refused", platform=message.chat.platform, user_id=message.user_id)
            if adapter is not None:
                await refuse_stranger(adapter, message)
            return
        if adapter is None:
            raise ValueError(f"no adapter for platform {message.chat.platform!r}")
        key = self._chat_key(message)
        gone, outbox = (lambda: self._drop_route(key)), getattr(self.source, "outbox", None)
        sink = PlatformReplySink(adapter, message.chat, on_recipient_gone=gone, outbox=outbox)
        approver = None
        if channel is not None and principal.can_approve:
            approver = self._chat_approver(channel, message)
        scope = read_scope(message, principal, self.config)
        self.submit(
            message, sink, access=TurnAccess(principal=principal, approver=approver, scope=scope)
        )

    def submit(
        self,
        message: InboundMessage,
        sink: ReplySink,
        *,
        session_id: str | None = None,
        access: TurnAccess | None = None,
        approver: Approver | None = None,
        options: TurnOptions | None = None,
        said: Sequence[ChatMessage] | None = None,
    ) -> asyncio.Future[TurnOutcome]:
        """Queue a message; the future resolves to the outcome once the turn is done.

        `access` is resolved here from the message when the caller did not (terminal, HTTP);
        `approver` is who can answer approvals for it (the terminal's prompt); `options` are
        the turn's overrides (client tools, pass-through fields, a routed model); `said` the
        turn's new messages when they are more than the text (tool results)."""
        if not self._accepting:
            raise HermesError("the gateway is shutting down")
        if access is None:
            access = self._access_for(message, approver)
        key = f"session:{session_id}" if session_id else self._chat_key(message)
        done: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        lane = self._lanes.setdefault(key, _Lane())
        item = _Item(
            message=message,
            sink=sink,
            access=access,
            done=done,
            session_id=session_id,
            options=options,
            said=said,
        )
        sid = session_id or self._routes.get(key, "")
        if self._steering.intake(  # /stop, /busy, and a message mid-turn (`gateway.steering`)
            key,
            lane,
            item,
            lambda r, c: TurnOutcome(reply=r, session_id=sid, kind="command", command=c),
        ):
            return done
        lane.queue.put_nowait(item)
        self._count_waiting(message.chat.platform, +1)
        if lane.worker is None:
            lane.worker = asyncio.create_task(self._work(key, lane), name=f"lane:{key}")
        return done

    @property
    def accepting(self) -> bool:
        """False once `stop` began: `submit` refuses new messages."""
        return self._accepting

    def _access_for(self, message: InboundMessage, approver: Approver | None) -> TurnAccess:
        principal = resolve_principal(
            message, self.config, has_approval_channel=approver is not None
        )
        if principal is None:
            raise HermesError(f"{message.chat.platform} user {message.user_id} is not allowed")
        return TurnAccess(
            principal=principal,
            approver=approver if principal.can_approve else None,
            scope=read_scope(message, principal, self.config),
        )

    def _chat_approver(self, channel: ApprovalChannel, message: InboundMessage) -> Approver:
        """Approvals asked in the message's chat, answered by an admin of that platform."""
        may_answer = may_answer_approvals(message, self.config)
        timeout_s = self.config.tools.approval_timeout_s

        async def ask(request: ApprovalRequest) -> ApprovalAnswer:
            return await channel.ask_approval(
                message.chat, request, may_answer=may_answer, timeout_s=timeout_s
            )

        return ask

    def _chat_key(self, message: InboundMessage) -> str:
        return f"{message.chat.platform}:" + chat_key(
            message, group_sessions=self.config.gateway.group_sessions
        )

    def interrupt(self, done: asyncio.Future[TurnOutcome]) -> bool:
        """Stop the turn `submit` returned `done` for, if it is running: its task is cancelled
        (a running tool's process group is killed, what streamed is kept, marked interrupted)
        and `done` resolves with `interrupted=True`. Returns whether a turn was stopped."""
        for lane in self._lanes.values():
            if lane.current is not None and lane.current[0].done is done:
                return lane.current[1].cancel()
        return False

    async def _work(self, key: str, lane: _Lane) -> None:
        try:
            while not lane.queue.empty():
                item = lane.queue.get_nowait()
                self._count_waiting(item.message.chat.platform, -1)
                started = time.monotonic()
                task = asyncio.create_task(self._handle(key, item), name=f"turn:{key}")
                lane.current = (item, task)
                try:
                    outcome = await self._outcome(key, item, task)
                finally:
                    lane.current = None
                for waiting in after_steering(lane, item, outcome):
                    self._count_waiting(waiting.message.chat.platform, +1)
                self._record_turn(item, outcome, time.monotonic() - started)
                if item.done is not None and not item.done.done():
                    item.done.set_result(outcome)
        finally:
            lane.worker = None
            if lane.queue.empty() and self._lanes.get(key) is lane:
                del self._lanes[key]

    def _count_waiting(self, platform: str, change: int) -> None:
        self._waiting[platform] += change
        self.metrics.record(QueueDepth(platform=platform, depth=self._waiting[platform]))

    def _record_turn(self, item: _Item, outcome: TurnOutcome, seconds: float) -> None:
        self.metrics.record(
            TurnDone(
                platform=item.message.chat.platform,
                kind=outcome.kind,
                seconds=seconds,
                session_id=outcome.session_id,
                usage=outcome.usage,
                model=outcome.model,
            )
        )

    async def _outcome(self, key: str, item: _Item, task: asyncio.Task[TurnOutcome]) -> TurnOutcome:
        """Wait for one item's task: its outcome, an interruption, or a failure turned into a
        reply. Cancelling the lane itself (shutdown) cancels the task and goes on up."""
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if item.done is not None and not item.done.done():
                item.done.cancel()
            raise
        if task.cancelled():
            log.info("turn_interrupted", lane=key)
            session_id = item.serving or item.session_id or ""
            await stopped(item.sink)
            return TurnOutcome(
                reply="", session_id=session_id, interrupted=True, kind="interrupted"
            )
        exc = task.exception()
        if exc is None:
            return task.result()
        if not isinstance(exc, Exception):
            raise exc
        if isinstance(exc, MessageTooLong):
            log.info("message_refused", lane=key, chars=exc.chars, limit=exc.limit)
        else:
            log.error("turn_failed", lane=key, exc_info=exc)  # a lane's root: the lane goes on
        return await self._failed(item, exc)

    async def _failed(self, item: _Item, exc: Exception) -> TurnOutcome:
        busy = isinstance(exc, SessionBusy)
        reply = failure_sentence(exc)
        try:
            await item.sink.finish(reply)
        except Exception:  # the sink itself is broken (e.g. the client went away)
            log.warning("reply_sink_failed", platform=item.message.chat.platform)
        error = exc if isinstance(exc, HermesError) else None
        return TurnOutcome(
            reply=reply, session_id=item.session_id or "", busy=busy, kind="failed", error=error
        )

    # ---- one message --------------------------------------------------------------------

    async def _handle(self, key: str, item: _Item) -> TurnOutcome:
        if parse_command(item.message.text) is None:  # a long /pin is still a command
            check_length(
                item.message.text,
                max_chars=self.config.gateway.max_message_chars,
                context_length=self.source.context_length,
            )
        owner = item.access.reads.owner
        for _ in range(MAX_REROUTES):
            session_id = item.session_id or await self._session_for(key, item.message, owner)
            item.serving = session_id
            async with self._lock(session_id):
                # Background work is never waited for: what it proposed is adopted inside.
                async with self._session_lock(session_id, item.sink):
                    info = await self.store.sessions.get_session(session_id)
                    if item.session_id is not None and not may_continue(item.access, info):
                        raise HermesError(f"no session {session_id!r}")
                    if item.session_id is None and (info is None or info.end_reason is not None):
                        self._drop_route(key)  # another worker ran /new (or rotated it)
                        await self.forget_agent(session_id)
                        continue
                    outcome, agent = await self._serve(key, item, session_id, info)
                if agent is not None:
                    await agent.finalize_turn()  # the reply is out: micro-compaction and friends
                return outcome
        raise HermesError(f"the chat's session kept changing under it ({MAX_REROUTES} times)")

    async def _serve(
        self, key: str, item: _Item, session_id: str, info: SessionInfo | None
    ) -> tuple[TurnOutcome, AIAgent | None]:
        """One message, holding the session's lock: a command, or a turn of the agent."""
        message = item.message
        await item.sink.start(session_id)
        if (cached := self._agents.get(session_id)) is not None:
            await cached.sync_with_store(info)
            await cached.memory.bind(memory_owner(message, item.access.principal.owner))
        command = parse_command(message.text)
        if isinstance(command, Command) and command.name == "retry":
            retried = await take_back(await self.agent_for(session_id), "retry")
            if retried.rerun is not None:  # answered as a new turn with the same words
                message, command = replace(message, text=retried.rerun), None
        if command is not None:
            chat = self._chat_key(message)  # commands act on the chat, whatever the lane
            answer = await run_command(self, command, message, session_id, chat, access=item.access)
            routed = await self._apply(answer.effect, chat, session_id)
            await item.sink.finish(answer.reply)
            name = command.name if isinstance(command, Command) else "unknown"
            outcome = TurnOutcome(
                reply=answer.reply, session_id=routed, kind="command", command=name
            )
            return outcome, None
        agent = await self.agent_for(session_id)
        before, info_before = list(agent.transcript), info  # for the compaction receipt
        await agent.memory.bind(memory_owner(message, item.access.principal.owner))
        if await agent.proposals.adopt_ready(incoming=message.text):  # a prepared compaction
            info = await self.store.sessions.get_session(session_id)
        api_tokens = self._api_tokens(agent, info)
        hygiene = await run_hygiene(agent, self.store.meta, api_tokens=api_tokens)
        receipts = receipt_mode(self.config, message.chat.platform)
        if hygiene.compacted and receipts == "off":
            await item.sink.notice(COMPACTED_NOTICE)
        result: TurnResult | None = None
        error: HermesError | None = None
        kind: TurnKind = "error"
        try:
            on_text = item.sink.on_text if item.sink.streams else None
            item.inbox = steer_inbox(message)
            steer = item.inbox.take if item.inbox else None
            result = await agent.run_turn(
                await said_of(self.media_intake, message, item.said, item.access.principal.owner),
                on_text=on_text,
                access=item.access,
                options=replace(item.options or TurnOptions(), steer=steer),
            )
        except (ProviderError, TurnLimitReached, TurnRefused, MediaRefused) as exc:
            reply, error = turn_failure_sentence(exc), exc
        else:
            reply, kind = result.reply, "reply"
        self._follow_rotation(key, session_id, agent)
        # A refused turn ran nothing: the caller answers it (the HTTP API's 400).
        if not isinstance(error, TurnRefused):
            await item.sink.finish(reply)
        if receipt := await note_compaction(agent, before, info_before, mode=receipts):
            await send_receipt(item.sink, receipt)
        outcome = TurnOutcome(
            reply=reply,
            session_id=agent.session_id,
            usage=result.usage if result is not None else None,
            compacted=hygiene.compacted,
            kind=kind,
            model=(item.options.model if item.options else None) or agent.model,
            turn=result,
            error=error,
        )
        return outcome, agent

    def _session_lock(self, session_id: str, sink: ReplySink) -> AbstractAsyncContextManager[Lease]:
        async def on_wait() -> None:
            log.info("session_busy_elsewhere", session_id=session_id)
            await sink.notice(BUSY_NOTICE)

        timeout_s = self.config.state.lock_timeout_s
        return self.store.locks.lock_session(session_id, timeout_s=timeout_s, on_wait=on_wait)

    async def _apply(self, effect: CommandEffect, key: str, session_id: str) -> str:
        """Carry out what a command asked for; returns the session the chat is on now."""
        match effect:
            case None:
                return session_id
            case Rerouted(session_id=new_session_id):
                await self.forget_agent(session_id)
                self._route(key, new_session_id)
                return new_session_id
            case Compacted(agent=agent):
                self._follow_rotation(key, session_id, agent)
                return agent.session_id
            case unreachable:
                assert_never(unreachable)

    async def new_session(self, message: InboundMessage) -> str:
        """A fresh session for the chat `message` comes from, without re-routing the chat (a
        front end that names its session, like the terminal, starts one this way); it
        belongs to the sender (`gateway.principals.conversation_owner`)."""
        info = await self.store.sessions.create_session(
            platform=message.chat.platform,
            chat_key=self._chat_key(message),
            user_id=message.user_id,
            model=self.config.model.default,
            owner=self._access_for(message, None).reads.owner,
        )
        return info.id

    async def _session_for(self, key: str, message: InboundMessage, owner: str) -> str:
        session_id = self._routes.get(key)
        if session_id is not None:
            self._routes.move_to_end(key)
            return session_id
        info = await self.store.sessions.get_or_create_for_chat(
            message.chat.platform,
            key,
            user_id=message.user_id,
            model=self.config.model.default,
            owner=owner,
        )
        self._route(key, info.id)
        return info.id

    def _drop_route(self, key: str) -> None:
        """The chat is gone (blocked the bot, deleted): forget where it pointed; the store keeps
        the session, so a chat that comes back finds it again."""
        self._routes.pop(key, None)

    def _route(self, key: str, session_id: str) -> None:
        self._routes[key] = session_id
        self._routes.move_to_end(key)
        while len(self._routes) > MAX_CACHED_ROUTES:
            self._routes.popitem(last=False)

    @staticmethod
    def _api_tokens(agent: AIAgent, info: SessionInfo | None) -> int | None:
        """The prompt size the provider last reported: this process's, else the stored one
        (a compaction resets that to 0, so a stale number never survives one)."""
        if agent.last_usage is not None:
            return agent.last_usage.prompt_tokens
        return (info.last_prompt_tokens if info is not None else 0) or None

    def _follow_rotation(self, key: str, session_id: str, agent: AIAgent) -> None:
        """A rotating compaction moved the agent to a child session: re-key what we hold."""
        if agent.session_id == session_id:
            return
        self._agents.pop(session_id, None)
        self._agents[agent.session_id] = agent
        if self._routes.get(key) == session_id:
            self._route(key, agent.session_id)

    # ---- what commands may read (`CommandContext`) ------------------------------------------

    @property
    def store(self) -> SessionStore:
        return self.source.store

    @property
    def default_context_length(self) -> int:
        return self.source.context_length

    # ---- agents -------------------------------------------------------------------------

    async def agent_for(self, session_id: str) -> AIAgent:
        agent = self._agents.get(session_id)
        if agent is None:
            agent = await self.source.open_agent(session_id)
            self._agents[session_id] = agent
            await self._evict_idle()
        self._agents.move_to_end(session_id)
        return agent

    async def owns_session(self, owner: str, session_id: str) -> bool:
        """Whether the session exists and is `owner`'s (another owner's is as unknown)."""
        info = await self.store.sessions.get_session(session_id)
        return info is not None and info.owner == owner

    async def forget_agent(self, session_id: str, *, delete: bool = False) -> None:
        agent = self._agents.pop(session_id, None)
        if agent is not None:
            await agent.wait_background()
            await self.source.release_agent(agent)
        if delete:  # a scratch session (a Responses `store: false` request): nothing stays
            await self.store.sessions.delete_session(session_id)

    async def _evict_idle(self) -> None:
        for session_id in list(self._agents):
            if len(self._agents) <= MAX_CACHED_AGENTS:
                return
            lock = self._session_locks.get(session_id)
            agent = self._agents[session_id]
            if (lock is None or not lock.locked()) and agent.is_idle():
                del self._agents[session_id]
                self._session_locks.pop(session_id, None)
                await agent.proposals.drop_proposal()
                await self.source.release_agent(agent)

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._session_locks.setdefault(session_id, asyncio.Lock())

    @property
    def cached_agents(self) -> int:
        return len(self._agents)
