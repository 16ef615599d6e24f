"""The default context engine: batch compaction of the middle into one structured summary.

The maths lives in `agent.compaction` (pure); this module is the thin shell around it: it tracks
real usage, decides cheaply when to compact, awaits the summary call with a deadline, applies the
failure policy and the loop guard, and logs one content-free `compaction_finished` line per pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

import structlog

from agent.archive.anchors import cite_absorbed
from agent.codex.autoraise import autoraised_threshold
from agent.compaction.assemble import assemble_compacted
from agent.compaction.boundary import TailPolicy
from agent.compaction.guard import (
    GuardState,
    after_attempt_failed,
    after_compaction,
    after_judgement,
    blocked_reason,
    tick,
)
from agent.compaction.headroom import Aim, compaction_aims, recent_growth_per_turn
from agent.compaction.local_summary import build_local_summary
from agent.compaction.plan import MAX_LEVEL, CompactionPlan, Degrade, plan_compaction
from agent.compaction.sanitize import sanitize_tool_pairs
from agent.compaction.summary_call import LocalFallback, request_summary
from agent.compaction.summary_prompt import build_summary_request
from agent.compaction.threshold import (
    MIN_REQUEST_OUTPUT_TOKENS,
    Budgets,
    compute_budgets,
    resolve_model_threshold,
)
from agent.config import CompressionConfig
from agent.context_engine import (
    DEFAULT_CONTEXT_LENGTH,
    CompactionReason,
    CompressResult,
    ContextEngine,
    EngineStatus,
    SummaryUpgrade,
)
from agent.errors import CompactionRefused
from agent.memory.facts import UserFact, anchor_facts, split_user_facts
from agent.messages import ChatMessage, content_text
from agent.providers.base import Provider, Usage
from agent.tokens import (
    TokenCalibrator,
    estimate_message_tokens_rough,
    estimate_messages_tokens_rough,
    estimate_tokens_rough,
)

__all__ = ["TARGET_FILL", "ContextCompressor", "resolve_model_threshold", "resolve_trigger_ratio"]

log = structlog.get_logger(__name__)

TARGET_FILL = 0.85
"""An automatic pass must be able to land at or below this share of the threshold, so each
compaction buys real headroom instead of firing again next turn."""
STOPGAP = "stopgap: the model's summary replaces this when it is ready"
"""The local summary's note when it stands in for a summary still to be made."""
SUMMARY_INPUT_SHARE = 0.6
"""Share of the window (in chars/4 tokens) the summary request may fill."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _UsageMark:
    prompt_tokens: int
    sent_count: int
    last_fingerprint: tuple[Any, ...]
    """Identifies the last message sent, even if the request carried a (cache-marked) copy."""


class ContextCompressor(ContextEngine):
    """Compacts at `compression.threshold` of the window, by real prompt tokens when known."""

    name = "compressor"
    prepares_ahead = True

    def __init__(
        self,
        config: CompressionConfig,
        *,
        summarizer: Provider,
        summary_model: str,
        summary_timeout_s: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        provider: str = "",
        max_output_tokens: int = 0,
        calibrator: TokenCalibrator | None = None,
        ask_user_facts: bool = False,
    ) -> None:
        self._config = config
        self._ask_user_facts = ask_user_facts
        """The summary call also lists facts about the user (`agent.memory.facts`)."""
        self._max_output_tokens = max_output_tokens
        """`model.max_tokens`: the reply's reserve in the window (see `output_reserve`)."""
        self._provider = provider
        """The main model's route: the Codex gpt-5.5 autoraise applies to one route only."""
        self._summarizer = summarizer
        self._summary_model = summary_model
        self._timeout_s = summary_timeout_s
        self._clock = clock
        self._calibrator = calibrator or TokenCalibrator()
        """Shared by a runtime's sessions (and seeded from what earlier processes learned)."""
        self._model = ""
        self._budgets = self._resolve("", DEFAULT_CONTEXT_LENGTH)
        self._usage: _UsageMark | None = None
        self._previous_summary: str | None = None
        self._guard = GuardState()
        self._compactions = 0
        self._local_summaries = 0
        self._last_outcome = ""
        self._last_refusal = ""

    # -- the ContextEngine interface -----------------------------------------------------------

    def update_model(self, model: str, context_length: int) -> None:
        if model != self._model:
            self._usage = None  # another model's prompt count says nothing about this one
        self._model = model
        self._budgets = self._resolve(model, context_length)

    def update_from_usage(self, usage: Usage, messages_sent: Sequence[ChatMessage]) -> None:
        real = usage.prompt_tokens
        if real <= 0:
            return
        self._calibrator.observe(self._model, estimate_messages_tokens_rough(messages_sent), real)
        self._usage = _UsageMark(
            prompt_tokens=real,
            sent_count=len(messages_sent),
            last_fingerprint=_fingerprint(messages_sent[-1]) if messages_sent else (),
        )
        if self._guard.awaiting_judgement:
            effective = real < self._budgets.threshold_tokens
            self._guard = after_judgement(self._guard, effective=effective, now_s=self._clock())
            if not effective:
                log.warning(
                    "compaction_ineffective",
                    prompt_tokens=real,
                    threshold_tokens=self._budgets.threshold_tokens,
                )

    def learn_from_overflow(
        self,
        *,
        window_tokens: int | None,
        prompt_tokens: int | None,
        messages_sent: Sequence[ChatMessage],
    ) -> int | None:
        """The server's own numbers beat our assumptions: a smaller window than we thought is
        adopted at once (its budgets re-resolved), and its prompt count calibrates the estimate."""
        if prompt_tokens:
            rough = estimate_messages_tokens_rough(messages_sent)
            self._calibrator.correct(self._model, rough, prompt_tokens)
        self._usage = None  # the request it described was refused
        if window_tokens and window_tokens < self._budgets.context_length:
            self._budgets = self._resolve(self._model, window_tokens)
            log.warning("context_window_learned", model=self._model, context_length=window_tokens)
            return window_tokens
        return None

    def should_compress(self, messages: Sequence[ChatMessage]) -> bool:
        if not self._config.enabled:
            return False
        self._guard = tick(self._guard)
        if self.current_tokens(messages) < self._budgets.threshold_tokens:
            return False
        blocked = blocked_reason(self._guard, self._clock())
        if blocked is not None:
            log.debug("compaction_deferred", why=blocked, checks=self._guard.checks)
            return False
        return True

    async def compress(
        self,
        messages: list[ChatMessage],
        *,
        focus: str | None = None,
        reason: CompactionReason = "threshold",
    ) -> CompressResult:
        result = await self.prepare(messages, focus=focus, reason=reason)
        self.adopt(result)
        return result

    async def prepare(
        self,
        messages: list[ChatMessage],
        *,
        focus: str | None = None,
        reason: CompactionReason = "threshold",
    ) -> CompressResult:
        """Plan and summarize, without counting the pass as done: `adopt` does that once the
        result is really used (a prepared compaction can still be discarded)."""
        return await self._prepare(messages, focus=focus, reason=reason, stopgap=False)

    async def prepare_stopgap(
        self, messages: list[ChatMessage], *, reason: CompactionReason = "context_too_long"
    ) -> CompressResult | None:
        """`prepare` with the deterministic local summary for the model's (no model call);
        the result's `upgrade` makes the model's summary of the same middle."""
        return await self._prepare(messages, focus=None, reason=reason, stopgap=True)

    async def _prepare(
        self,
        messages: list[ChatMessage],
        *,
        focus: str | None,
        reason: CompactionReason,
        stopgap: bool,
    ) -> CompressResult:
        started = self._clock()
        tokens_before = self._calibrator.estimate(self._model, messages)
        upgrade: SummaryUpgrade | None = None
        try:
            plan = self._plan(messages, reason, tokens_before)
            facts: tuple[UserFact, ...] = ()
            if plan.middle:
                if stopgap:  # no model call now; the model's summary follows
                    summary, outcome = self._local_summary(plan, STOPGAP), "stopgap"
                    upgrade = self._upgrade(plan, messages)
                else:
                    must_fit = reason == "context_too_long"
                    summary, outcome = await self._summarize(plan, focus, must_fit=must_fit)
                summary, facts = split_user_facts(summary)
                facts = anchor_facts(facts, plan.middle_original)
                summary = cite_absorbed(
                    summary,
                    absorbed=[*plan.cleared_head, *plan.middle_original],
                    transcript=messages,
                    previous=plan.previous_summary,
                )
                compacted = assemble_compacted(
                    plan.head, summary, plan.boundaries.summary_role, plan.tail
                )
            else:  # nothing to summarize: the pass only cut what it must keep (degrade level 3+)
                summary, outcome = self._previous_summary or "", "cut"
                compacted = sanitize_tool_pairs([*plan.head, *plan.tail])
            tokens_after = self._calibrator.estimate(self._model, compacted)
            if tokens_after >= tokens_before:
                raise CompactionRefused(
                    f"compaction would not shrink the transcript ({tokens_before} -> "
                    f"{tokens_after} tokens)"
                )
        except CompactionRefused as exc:
            self._refused(exc.reason, reason, messages, tokens_before, started)
            raise
        result = CompressResult(
            messages=compacted,
            summary_tokens=estimate_tokens_rough(summary),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            messages_before=len(messages),
            messages_after=len(compacted),
            outcome=outcome,
            reason=reason,
            duration_ms=(self._clock() - started) * 1000,
            detail=plan.detail,
            summary=summary,
            user_facts=facts,
            upgrade=upgrade,
        )
        return result

    def _upgrade(self, plan: CompactionPlan, messages: list[ChatMessage]) -> SummaryUpgrade:
        """The model's summary of the plan's middle, cited as a batch summary is."""

        async def model_summary() -> str:
            text, outcome = await self._model_summary(plan, None)
            if outcome != "compressed":
                raise CompactionRefused("the summary model failed; the stopgap summary stays")
            text, _facts = split_user_facts(text)
            return cite_absorbed(
                text,
                absorbed=[*plan.cleared_head, *plan.middle_original],
                transcript=messages,
                previous=plan.previous_summary,
            )

        return model_summary

    def adopt(self, result: CompressResult) -> None:
        self._finished(result, automatic=result.reason == "threshold", summary=result.summary)

    def status(self) -> EngineStatus:
        b = self._budgets
        return EngineStatus(
            engine=self.name,
            model=self._model,
            context_length=b.context_length,
            threshold_tokens=b.threshold_tokens,
            threshold_ratio=b.threshold_ratio,
            tail_token_budget=b.tail_token_budget,
            max_summary_tokens=b.max_summary_tokens,
            last_prompt_tokens=self._usage.prompt_tokens if self._usage else None,
            token_ratio=round(self._calibrator.ratio(self._model), 3),
            compactions=self._compactions,
            local_summaries=self._local_summaries,
            failures=self._guard.total_failures,
            consecutive_failures=self._guard.consecutive_failures,
            last_outcome=self._last_outcome,
            last_refusal=self._last_refusal,
            has_previous_summary=self._previous_summary is not None,
        )

    def reset_session(self) -> None:
        self._usage = None
        self._previous_summary = None
        self._guard = GuardState()
        self._compactions = 0
        self._local_summaries = 0
        self._last_outcome = ""
        self._last_refusal = ""

    @property
    def threshold_tokens(self) -> int:
        return self._budgets.threshold_tokens

    @property
    def context_length(self) -> int:
        return self._budgets.context_length

    @property
    def budgets(self) -> Budgets:
        return self._budgets

    # -- helpers ---------------------------------------------------------------------------------

    def current_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Real prompt tokens of the last call plus an estimate of what was added since, when
        that report still describes a prefix of `messages`; else the calibrated estimate."""
        mark = self._usage
        if mark is not None and _extends(messages, mark):
            added = estimate_messages_tokens_rough(messages[mark.sent_count :])
            return mark.prompt_tokens + self._calibrator.scale(self._model, added)
        return self._calibrator.estimate(self._model, messages)

    def _resolve(self, model: str, context_length: int) -> Budgets:
        ratio = resolve_trigger_ratio(
            self._config, model=model, provider=self._provider, context_length=context_length
        )
        return compute_budgets(
            context_length, ratio, self._config.target_ratio, max_tokens=self._max_output_tokens
        )

    def _policy(self) -> TailPolicy:
        return TailPolicy.from_config(
            self._config, tail_token_budget=self._budgets.tail_token_budget
        )

    def _plan(
        self, messages: list[ChatMessage], reason: CompactionReason, tokens_before: int
    ) -> CompactionPlan:
        """The plan for this pass: the first of its aims that a plan reaches (`_aims`)."""
        ceiling = self._max_degrade_level(reason, tokens_before)
        aims = [
            aim for aim in self._aims(messages, reason, tokens_before) if aim.min_level <= ceiling
        ]
        for index, aim in enumerate(aims):
            try:
                return plan_compaction(
                    messages,
                    policy=self._policy(),
                    max_summary_tokens=self._budgets.max_summary_tokens,
                    limit_tokens=aim.limit_tokens,
                    measure=self._measure,
                    previous_summary=self._previous_summary,
                    min_level=aim.min_level,
                    max_level=min(aim.max_level, ceiling),
                    clear_head=aim.clear_head,
                )
            except CompactionRefused:
                if index == len(aims) - 1:
                    raise
        raise AssertionError("unreachable: the last aim raises or returns")

    def _aims(
        self, messages: list[ChatMessage], reason: CompactionReason, tokens_before: int
    ) -> list[Aim]:
        """Where this pass should land, most wanted first. An automatic pass frees room for
        about ten turns of the session's recent growth (`agent.compaction.headroom`); one that
        must make room now (the provider refused the prompt) and cannot reach the usual
        headroom settles for fitting the window; a manual one below the threshold must just
        shrink."""
        limit = self._limit(reason, tokens_before)
        if reason == "manual":
            return [Aim(limit_tokens=limit)]
        overhead = self._calibrator.overhead(self._model)
        aims = list(
            compaction_aims(
                threshold_tokens=self._budgets.threshold_tokens - overhead,
                target_tokens=limit,
                growth_per_turn=recent_growth_per_turn(messages, self._measure),
                context_length=self._budgets.context_length,
            )
        )
        if reason == "context_too_long":
            fit = self._budgets.context_length - 2 * MIN_REQUEST_OUTPUT_TOKENS
            aims.append(Aim(limit_tokens=fit - overhead))
        return aims

    def _limit(self, reason: CompactionReason, tokens_before: int) -> int:
        """Where a pass must land. Automatic passes, and a manual one over the threshold, must
        reach TARGET_FILL of it (real headroom, not a pass every turn); below the threshold a
        manual pass must just shrink."""
        overhead = self._calibrator.overhead(self._model)
        target = int(self._budgets.threshold_tokens * TARGET_FILL) - overhead
        match reason:
            case "threshold" | "context_too_long" | "hygiene":
                return target
            case "manual":
                over = tokens_before >= self._budgets.threshold_tokens
                return target if over else tokens_before - 1 - overhead
            case unreachable:
                assert_never(unreachable)

    def _max_degrade_level(self, reason: CompactionReason, tokens_before: int) -> Degrade:
        """A manual pass keeps the tail verbatim, unless the session no longer fits: then, as
        every automatic pass, it may degrade all the way (a session is never bricked)."""
        match reason:
            case "manual":
                over = tokens_before >= self._budgets.threshold_tokens
                return MAX_LEVEL if over else Degrade.TAIL_VERBATIM
            case "threshold" | "context_too_long" | "hygiene":
                return MAX_LEVEL
            case unreachable:
                assert_never(unreachable)

    def _measure(self, msg: ChatMessage) -> int:
        return self._calibrator.scale(self._model, estimate_message_tokens_rough(msg))

    async def _summarize(
        self, plan: CompactionPlan, focus: str | None, *, must_fit: bool = False
    ) -> tuple[str, str]:
        """(summary text, outcome). A transient or unusable reply raises CompactionRefused
        (the transcript stays as it was) unless the session must be made to fit now (the
        provider refused it as too long): then the deterministic local summary stands in."""
        try:
            return await self._model_summary(plan, focus)
        except CompactionRefused as exc:
            if not must_fit:
                raise
            log.warning("summary_replaced_by_local", why=exc.reason)
            return self._local_summary(plan, exc.reason), "local_summary"

    async def _model_summary(self, plan: CompactionPlan, focus: str | None) -> tuple[str, str]:
        request = build_summary_request(
            plan.middle,
            model=self._summary_model,
            budget_tokens=plan.summary_budget,
            previous_summary=plan.previous_summary,
            focus=focus,
            max_input_chars=int(self._budgets.context_length * SUMMARY_INPUT_SHARE * 4),
            ask_user_facts=self._ask_user_facts,
        )
        text = await request_summary(self._summarizer, request, timeout_s=self._timeout_s)
        if isinstance(text, LocalFallback):
            return self._local_summary(plan, text.failure), "local_summary"
        return text, "compressed"

    def _local_summary(self, plan: CompactionPlan, failure: str) -> str:
        return build_local_summary(
            plan.middle_original,
            previous_summary=plan.previous_summary,
            failure=failure,
            max_chars=plan.summary_budget * 4,
        )

    def _finished(self, result: CompressResult, *, automatic: bool, summary: str) -> None:
        self._previous_summary = summary
        self._usage = None  # the next trigger estimates until a real report arrives
        self._guard = after_compaction(self._guard, automatic=automatic)
        self._compactions += 1
        self._local_summaries += result.outcome == "local_summary"
        self._last_outcome = result.outcome
        _log_telemetry(
            outcome=result.outcome,
            reason=result.reason,
            detail=result.detail,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            messages_before=result.messages_before,
            messages_after=result.messages_after,
            summary_tokens=result.summary_tokens,
            duration_ms=result.duration_ms,
        )

    def _refused(
        self,
        why: str,
        reason: CompactionReason,
        messages: Sequence[ChatMessage],
        tokens_before: int,
        started: float,
    ) -> None:
        self._guard = after_attempt_failed(self._guard, self._clock())
        self._last_outcome = "refused"
        self._last_refusal = why
        _log_telemetry(
            outcome="refused",
            reason=reason,
            detail=why,
            tokens_before=tokens_before,
            tokens_after=tokens_before,
            messages_before=len(messages),
            messages_after=len(messages),
            summary_tokens=0,
            duration_ms=(self._clock() - started) * 1000,
        )


def resolve_trigger_ratio(
    config: CompressionConfig, *, model: str, provider: str, context_length: int
) -> float:
    """The share of the window at which batch compaction fires: the configured threshold, the
    per-model override, the small-window floor, then the Codex gpt-5.5 autoraise for its route."""
    ratio = resolve_model_threshold(
        model, config.threshold, config.model_thresholds, context_length
    )
    return autoraised_threshold(
        provider=provider, model=model, threshold=ratio, autoraise=config.codex_gpt55_autoraise
    )


def _extends(messages: Sequence[ChatMessage], mark: _UsageMark) -> bool:
    """Whether `messages` still starts with the request that `mark` was reported for."""
    count = mark.sent_count
    if count == 0 or len(messages) < count:
        return False
    return _fingerprint(messages[count - 1]) == mark.last_fingerprint


def _fingerprint(msg: ChatMessage) -> tuple[Any, ...]:
    """Role, text, tool ids and creation stamp: equal for a message and its wire-ready copy."""
    calls = tuple(c.get("id") for c in msg.get("tool_calls") or ())
    return (
        msg.get("role"),
        content_text(msg),
        msg.get("tool_call_id"),
        calls,
        msg.get("_created_at"),
    )


def _log_telemetry(**fields: Any) -> None:
    """One content-free line per pass: counts, timing, outcome and reason; never message text."""
    fields["duration_ms"] = round(fields["duration_ms"], 2)
    log.info("compaction_finished", **fields)
