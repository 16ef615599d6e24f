"""Micro-compaction: after a finished turn, fold one exchange into one rolling summary marker.

`MicroCompaction` is an `EndOfTurnWork`: `AIAgent.finalize_turn` runs it in the background after
the reply reached the user, from a snapshot; it proposes the new transcript, which the agent
adopts at the next turn boundary (`agent.proposals`): a turn never waits for a pass. The rules are pure and live
in `agent.compaction.micro_*`; this module is the I/O shell around them: one summarizer call
(with a deadline), one atomic `archive_and_compact`, one telemetry line per pass.

Decisions worth knowing (see also docs/context-management.md):

- The rolling marker has the batch marker's format plus a trailer (`MICRO_TRAILER`), so a batch
  marker is never mistaken for it. A batch marker is never rewritten: the micro region starts
  after the newest one and the rolling summary starts fresh there (a batch compaction, which
  absorbs the rolling marker, thereby resets the micro state). There is at most one micro marker.
- The cursor is kept as the row id of the message before it; it survives resume through the
  session's meta (`micro_compaction`), and is recovered from the rolling marker when missing or
  no longer in the transcript.
- A pass's state (cursor anchor, counts) moves on only once its proposal is adopted, i.e. the
  store committed it; a dropped proposal or any failure leaves the transcript untouched.
- Several workers: a pass starts only when the agent's transcript is the stored one (the
  session's version) and reads its state from the session's meta each time; the agent commits
  the proposal with `expected_version`, and a conflict drops it (the next turn tries again).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from agent.archive.anchors import cite_absorbed, split_index
from agent.compaction.boundary import TailPolicy
from agent.compaction.coverage import coverage, salient_terms
from agent.compaction.fold_cost import (
    CACHED,
    UNCACHED,
    fold_pays,
    tight_fold_horizon_requests,
)
from agent.compaction.headroom import is_tight_window
from agent.compaction.markers import is_marker, make_micro_marker
from agent.compaction.micro_cadence import (
    MAX_FAILURES_PER_EXCHANGE,
    Cadence,
    FailureState,
    after_failure,
    after_success,
    cache_ttl_seconds,
    cold_delay_s,
    decide_cadence,
    defrag_backoff_floor,
    defrag_rejection,
    fold_horizon_requests,
    occupancy_pct,
    requests_per_turn,
    should_defrag,
)
from agent.compaction.micro_cursor import (
    Exchange,
    MicroView,
    absorbed_by,
    defrag_absorbed,
    find_exchange,
    find_exchanges,
    first_divergence,
    locate_cursor,
    splice_defrag,
    splice_exchange,
    view_transcript,
)
from agent.compaction.micro_prompt import build_defrag_request, build_fold_request
from agent.compaction.micro_telemetry import (
    defrag_line,
    messages_line,
    skip_line,
    telemetry_line,
)
from agent.config import CompressionConfig
from agent.messages import ChatMessage, content_text, is_real_user_message
from agent.proposals import Proposal
from agent.providers.base import Provider, ProviderRequest
from agent.redaction import redact_text
from agent.session_meta import MicroMeta, parse_meta, write_micro
from agent.tokens import estimate_message_tokens_rough, estimate_tokens_rough

if TYPE_CHECKING:
    from agent.background import SessionView

__all__ = ["MicroCompaction"]

log = structlog.get_logger(__name__)

_MARKER_SCAFFOLDING_TOKENS = estimate_message_tokens_rough(make_micro_marker("", "assistant"))
"""The rolling marker's fixed text (preamble, headings, trailer): what a first fold adds."""


class _PassFailed(Exception):
    """The summarizer gave nothing usable; `reason` is a content-free label."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class _SessionState:
    anchor_id: int | None = None
    failures: FailureState = field(default_factory=FailureState)
    defrag_floor: int = 0
    """After a rejected defrag: the summary size the next defrag waits for. It survives folds
    (each writes a new marker row); a successful defrag or a fresh rolling summary clears it."""
    passes_total: int = 0
    tokens_saved_total: int = 0

    def to_meta(self) -> MicroMeta:
        return MicroMeta(
            anchor_id=self.anchor_id,
            fail_exchange_id=self.failures.exchange_id,
            fail_count=self.failures.count,
            failures_total=self.failures.total,
            defrag_floor=self.defrag_floor,
            passes_total=self.passes_total,
            tokens_saved_total=self.tokens_saved_total,
        )

    @classmethod
    def from_meta(cls, meta: MicroMeta) -> _SessionState:
        return cls(
            anchor_id=meta.anchor_id,
            failures=FailureState(
                exchange_id=meta.fail_exchange_id, count=meta.fail_count, total=meta.failures_total
            ),
            defrag_floor=meta.defrag_floor,
            passes_total=meta.passes_total,
            tokens_saved_total=meta.tokens_saved_total,
        )


@dataclass(slots=True, kw_only=True)
class _Pass:
    """One pass in progress: its inputs and the figures its telemetry reports."""

    session: SessionView
    transcript: list[ChatMessage]
    ratio: float
    tokens_before: int
    view: MicroView
    cursor: int
    state: _SessionState
    cadence: Cadence
    started: float
    threshold_tokens: int
    context_length: int
    defrag: bool = False
    exchange_tokens: int = 0
    exchange_messages: int = 0
    llm_ms: float = 0.0


class MicroCompaction:
    """The end-of-turn work that absorbs one exchange per finished turn (`compression.micro_*`)."""

    def __init__(
        self,
        config: CompressionConfig,
        *,
        summarizer: Provider,
        summary_model: str,
        summary_timeout_s: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._summarizer = summarizer
        self._model = summary_model
        self._timeout_s = summary_timeout_s
        self._clock = clock
        self._states: dict[str, _SessionState] = {}

    async def __call__(self, session: SessionView) -> Proposal | None:
        """Run at most one pass and propose its result; never raises for ordinary failures
        (they are counted)."""
        if not (self._config.enabled and self._config.micro_compact):
            return None
        try:
            return await self._run(session)
        except asyncio.CancelledError:
            raise
        except Exception:  # a pass can never break a session
            log.exception("micro_compaction_crashed", session_id=session.session_id)
            return None

    def delay_s(self, session: SessionView) -> float | None:
        """None when switched off; 0 to fold now; else wait until the prompt cache is cold."""
        if not (self._config.enabled and self._config.micro_compact):
            return None
        engine = session.engine
        return cold_delay_s(
            when=self._config.micro_compact_when,
            now=session.now(),
            last_request_at=session.last_request_at,
            cache_ttl_s=cache_ttl_seconds(session.cache_ttl),
            tokens=engine.current_tokens(session.transcript),
            threshold_tokens=engine.threshold_tokens,
            occupancy_trigger=self._config.micro_occupancy_trigger,
        )

    def state_of(self, session_id: str) -> MicroMeta | None:
        """The in-memory micro state of a session (cursor anchor, counts), for status and tests."""
        state = self._states.get(session_id)
        return None if state is None else state.to_meta()

    def forget_session(self, session_id: str) -> None:
        """Drop what is held for a session that left memory; its meta record keeps the state."""
        self._states.pop(session_id, None)

    # ---- the pass ---------------------------------------------------------------------------

    async def _run(self, session: SessionView) -> Proposal | None:
        started = time.perf_counter()
        transcript = list(session.transcript)  # a snapshot: a turn may append meanwhile
        engine = session.engine
        status = engine.status()
        if status.tail_token_budget is None or not _turn_finished(transcript):
            return None  # an engine without a protected tail (a plugin), or an unfinished turn
        ratio = status.token_ratio
        tokens = [round(estimate_message_tokens_rough(m) * ratio) for m in transcript]
        tokens_before = sum(tokens)
        cadence = decide_cadence(
            when=self._config.micro_compact_when,
            now=session.now(),
            last_request_at=session.last_request_at,
            cache_ttl_s=cache_ttl_seconds(session.cache_ttl),
            tokens=engine.current_tokens(transcript),
            threshold_tokens=engine.threshold_tokens,
            occupancy_trigger=self._config.micro_occupancy_trigger,
        )
        if not cadence.run:
            log.debug(
                "micro_compaction_deferred", session_id=session.session_id, why=cadence.reason
            )
            return None
        policy = TailPolicy.from_config(self._config, tail_token_budget=status.tail_token_budget)
        view = view_transcript(transcript, tokens, policy)
        if view is None:
            return None
        state = await self._state_for(session)
        if state is None:
            return None
        p = _Pass(
            session=session,
            transcript=transcript,
            ratio=ratio,
            tokens_before=tokens_before,
            view=view,
            cursor=locate_cursor(transcript, view, state.anchor_id),
            state=state,
            cadence=cadence,
            started=started,
            threshold_tokens=engine.threshold_tokens,
            context_length=engine.context_length,
        )
        return await self._defrag_or_fold(p)

    async def _defrag_or_fold(self, p: _Pass) -> Proposal | None:
        summary_tokens = self._tokens_of_text(p, split_index(p.view.summary or "")[0])
        if p.view.summary is None:
            p.state.defrag_floor = 0  # no rolling summary (yet, or a batch pass absorbed it)
        floor = p.state.defrag_floor
        if p.view.summary and should_defrag(
            summary_tokens, self._config.micro_defrag_tokens, floor
        ):
            return await self._defrag(p, summary_tokens)
        # At a tight window a fold is weighed on every route, unless told to run `always`.
        tight = is_tight_window(p.context_length) and p.cadence.reason != "always"
        if p.cadence.reason != "no_cache" and not tight:
            exchange = find_exchange(p.transcript, p.cursor, p.view.tail_start)
        else:
            exchange = self._paying_span(p, summary_tokens, tight=tight)
        if exchange is None:
            log.debug("micro_compaction_idle", session_id=p.session.session_id, cursor=p.cursor)
            return None
        return await self._fold(p, exchange)

    def _paying_span(self, p: _Pass, summary_tokens: int, *, tight: bool) -> Exchange | None:
        """On a route without a prompt cache every request pays for every token, and so does a
        fold's summary call: fold the fewest oldest exchanges whose saving over the requests
        that will still carry them (until the next batch compaction) repays that call
        (`agent.compaction.fold_cost.fold_pays`), or the oldest one when occupancy demands it;
        else wait, never fold just because a turn ended. At a tight window, on either route, in
        money over the net horizon of `agent.compaction.fold_cost`."""
        exchanges = find_exchanges(p.transcript, p.cursor, p.view.tail_start)
        if not exchanges:
            return None
        tokens_now = p.session.engine.current_tokens(p.transcript)
        trigger = self._config.micro_occupancy_trigger
        if p.threshold_tokens > 0 and tokens_now >= p.threshold_tokens * trigger:
            return exchanges[0]
        scaffolding = 0 if p.view.marker_index is not None else _MARKER_SCAFFOLDING_TOKENS
        first = absorbed_by(p.transcript, exchanges[0])
        request = build_fold_request(
            first,
            summary=p.view.summary,
            model=self._model,
            budget_tokens=self._config.micro_defrag_tokens,
        )
        # The call's fixed part (instructions, summary, labels), measured once; each further
        # exchange adds its own tokens (linear in the exchanges, however many wait).
        fixed = self._tokens_of(p, request.messages) - self._tokens_of(p, first)
        horizon_of = tight_fold_horizon_requests if tight else fold_horizon_requests
        horizon = horizon_of(
            tokens=tokens_now,
            threshold_tokens=p.threshold_tokens,
            growth_per_turn=p.session.growth.per_turn,
            requests_per_turn=requests_per_turn(_recent_roles(p.transcript)),
        )
        prices = UNCACHED if p.cadence.reason == "no_cache" else CACHED
        absorbed_tokens = 0
        for exchange in exchanges:
            absorbed_tokens += self._tokens_of(p, absorbed_by(p.transcript, exchange))
            request_tokens, scaffold = fixed + absorbed_tokens, round(scaffolding * p.ratio)
            pays = fold_pays(
                exchange_tokens=absorbed_tokens,
                request_tokens=request_tokens,
                summary_tokens=summary_tokens,
                scaffolding_tokens=scaffold,
                horizon_requests=horizon,
                prices=prices,
            )
            if pays:
                return Exchange(start=exchanges[0].start, end=exchange.end)
        log.info(
            "micro_compaction_deferred",
            session_id=p.session.session_id,
            why="fold_would_not_pay",
            exchanges=len(exchanges),
        )
        return None

    async def _fold(self, p: _Pass, exchange: Exchange) -> Proposal | None:
        absorbed = absorbed_by(p.transcript, exchange)
        p.exchange_tokens = self._tokens_of(p, absorbed)
        p.exchange_messages = len(absorbed)
        request = build_fold_request(
            absorbed,
            summary=p.view.summary,
            model=self._model,
            budget_tokens=self._config.micro_defrag_tokens,
        )
        try:
            summary = await self._summarize(p, request)
        except _PassFailed as exc:
            await self._failed(p, exc.reason, exchange)
            return None
        summary = cite_absorbed(
            summary, absorbed=absorbed, transcript=p.transcript, previous=p.view.summary
        )
        new, cursor = splice_exchange(p.transcript, p.view, exchange, summary)
        return self._propose(p, new, cursor, outcome="absorbed", summary=summary)

    async def _defrag(self, p: _Pass, summary_tokens: int) -> Proposal | None:
        p.defrag = True
        absorbed = defrag_absorbed(p.transcript, p.view)
        p.exchange_tokens = self._tokens_of(p, absorbed)
        p.exchange_messages = len(absorbed)
        request = build_defrag_request(
            absorbed,
            summary=p.view.summary or "",
            model=self._model,
            budget_tokens=max(1, self._config.micro_defrag_tokens // 2),
        )
        try:
            summary = await self._summarize(p, request)
        except _PassFailed as exc:
            self._back_off_defrag(p, summary_tokens)
            await self._failed(p, exc.reason, None)
            return None
        summary = cite_absorbed(
            summary, absorbed=absorbed, transcript=p.transcript, previous=p.view.summary
        )
        body = split_index(summary)[0]  # the index is our bookkeeping, not the model's prose
        rejection = defrag_rejection(
            new_summary_tokens=self._tokens_of_text(p, body),
            old_summary_tokens=summary_tokens,
            middle_coverage=coverage(salient_terms(absorbed), body),
        )
        if rejection is not None:
            self._back_off_defrag(p, summary_tokens)
            await self._report(p, outcome="defrag_rejected", new=p.transcript, reason=rejection)
            return None
        new, cursor = splice_defrag(p.transcript, p.view, summary)
        return self._propose(p, new, cursor, outcome="defragged", summary=summary)

    async def _summarize(self, p: _Pass, request: ProviderRequest) -> str:
        """The new summary text, credentials redacted; `_PassFailed` when unusable."""
        called = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await self._summarizer.complete(request)
        except TimeoutError as exc:
            raise _PassFailed("timeout") from exc
        except Exception as exc:  # every provider failure counts the same way
            raise _PassFailed(type(exc).__name__) from exc
        finally:
            p.llm_ms = (time.perf_counter() - called) * 1000
        if reply.stop_reason == "max_tokens":
            raise _PassFailed("truncated")
        text = content_text(reply.message).strip()
        if not text:
            raise _PassFailed("empty")
        return redact_text(text)

    # ---- outcomes ---------------------------------------------------------------------------

    def _propose(
        self, p: _Pass, new: list[ChatMessage], cursor: int, *, outcome: str, summary: str
    ) -> Proposal:
        """The pass's result as a proposal: its state moves on only once it is adopted."""
        session_id = p.session.session_id

        async def adopted(adopted_transcript: list[ChatMessage]) -> None:
            # The prefix is the proposal's own `new`: the cursor indexes into it unchanged.
            p.state.anchor_id = _int_or_none(adopted_transcript[cursor - 1].get("_id"))
            p.state.failures = after_success(p.state.failures)
            if p.defrag:
                p.state.defrag_floor = 0
                log.info(defrag_line(len(summary)), session_id=session_id)
            log.info(messages_line(len(p.transcript), len(new)), session_id=session_id)
            summary_tokens = self._tokens_of_text(p, summary)
            await self._report(p, outcome=outcome, new=new, summary_tokens=summary_tokens)

        async def dropped(why: str) -> None:
            log.info("micro_compaction_discarded", session_id=session_id, why=why)
            if why == "store_failed":
                await self._failed(p, why, None)

        return Proposal(
            kind="micro",
            base=tuple(p.transcript),
            prefix=new,
            on_adopted=adopted,
            on_dropped=dropped,
        )

    async def _failed(self, p: _Pass, reason: str, exchange: Exchange | None) -> None:
        state = p.state
        exchange_id = _int_or_none(p.transcript[exchange.start].get("_id")) if exchange else None
        state.failures, skip = after_failure(state.failures, exchange_id)
        if skip and exchange is not None:
            state.anchor_id = _int_or_none(p.transcript[exchange.end - 1].get("_id"))
            log.warning(
                skip_line(exchange.start, MAX_FAILURES_PER_EXCHANGE),
                session_id=p.session.session_id,
            )
        await self._report(p, outcome="failed", new=p.transcript, reason=reason, skipped=skip)

    def _back_off_defrag(self, p: _Pass, summary_tokens: int) -> None:
        floor = defrag_backoff_floor(summary_tokens, self._config.micro_defrag_tokens)
        p.state.defrag_floor = floor

    async def _report(
        self, p: _Pass, *, outcome: str, new: Sequence[ChatMessage], **extra: Any
    ) -> None:
        """Count the pass, persist the micro state, and log the one telemetry line."""
        state = p.state
        tokens_after = self._tokens_of(p, new)
        delta = tokens_after - p.tokens_before
        state.passes_total += 1
        state.tokens_saved_total -= delta
        duration_ms = (time.perf_counter() - p.started) * 1000
        broken = first_divergence(p.transcript, new)
        fields: dict[str, Any] = {
            "outcome": outcome,
            "tokens_before": p.tokens_before,
            "tokens_after": tokens_after,
            "tokens_delta": delta,
            "occupancy_pct": occupancy_pct(tokens_after, p.threshold_tokens, p.context_length),
            "threshold_tokens": p.threshold_tokens,
            "context_limit": p.context_length,
            "exchange_tokens": p.exchange_tokens,
            "rolling_summary_tokens": extra.pop("summary_tokens", None),
            "passes_total": state.passes_total,
            "tokens_saved_total": state.tokens_saved_total,
            "duration_ms": round(duration_ms, 2),
            "llm_ms": round(p.llm_ms, 2),
            "overhead_ms": round(duration_ms - p.llm_ms, 2),
            "session_id": p.session.session_id,
            "messages_before": len(p.transcript),
            "messages_after": len(new),
            "exchange_messages": p.exchange_messages,
            "cursor": p.cursor,
            "defrag": p.defrag,
            "cadence": p.cadence.reason,
            "cache_break_tokens": self._tokens_of(p, new[broken:]) if broken < len(new) else 0,
            "failures_total": state.failures.total,
            **extra,
        }
        if fields["rolling_summary_tokens"] is None:
            fields["rolling_summary_tokens"] = self._tokens_of_text(p, p.view.summary or "")
        log.info(telemetry_line(fields))
        store, session_id = p.session.store, p.session.session_id
        await _quietly(write_micro(store.meta, session_id, state.to_meta()), "meta")

    # ---- helpers ----------------------------------------------------------------------------

    async def _state_for(self, session: SessionView) -> _SessionState | None:
        """The micro state as the session's meta holds it now; None when the agent's transcript
        is not the stored one (another worker moved the session: its next turn reloads)."""
        try:
            info = await session.store.sessions.get_session(session.session_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("micro_state_unreadable", error_type=type(exc).__name__)
            info = None
        if info is None:
            return self._states.setdefault(session.session_id, _SessionState())
        if session.known_version is not None and info.version != session.known_version:
            log.info("micro_compaction_stale", session_id=session.session_id, version=info.version)
            return None
        state = self._states[session.session_id] = _SessionState.from_meta(
            parse_meta(info.meta).micro
        )
        return state

    @staticmethod
    def _tokens_of(p: _Pass, messages: Sequence[ChatMessage]) -> int:
        return round(sum(map(estimate_message_tokens_rough, messages)) * p.ratio)

    @staticmethod
    def _tokens_of_text(p: _Pass, text: str) -> int:
        return round(estimate_tokens_rough(text) * p.ratio)


def _turn_finished(transcript: Sequence[ChatMessage]) -> bool:
    """The turn ended with a final answer (not an error, not a pending tool call)."""
    if not transcript:
        return False
    last = transcript[-1]
    return last.get("role") == "assistant" and not last.get("tool_calls")


def _recent_roles(transcript: Sequence[ChatMessage], turns: int = 5) -> list[str]:
    """The roles of the newest `turns` user turns' messages, "user" for a real user message."""
    roles: list[str] = []
    users = 0
    for message in reversed(transcript):
        if is_real_user_message(message):
            roles.append("user")
            users += 1
            if users == turns:
                break
        elif message.get("role") == "assistant" and not is_marker(message):
            roles.append("assistant")
    return roles


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def _quietly(awaitable: Any, what: str) -> None:
    """Bookkeeping writes: a failure is logged, never raised (the pass itself is committed)."""
    try:
        await awaitable
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("micro_bookkeeping_failed", what=what, error_type=type(exc).__name__)
