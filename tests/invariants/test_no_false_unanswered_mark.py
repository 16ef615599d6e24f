"""Invariant: no request tells the model an answered message went unanswered (issue 33).

Micro-compaction keeps every user message and folds the replies, so user messages end up side
by side before the rolling marker. The provider edge (`agent.turn.well_formed`) must read such a
pair as folded (`FOLDED_MARK`) and keep `UNANSWERED_MARK` for replies truly never stored (a
killed worker). Property: for any sequence of answered turns, lost replies, micro passes
(one exchange or a span of them), defrags and batch compactions, every request carries
`UNANSWERED_MARK` exactly after the messages whose reply was lost, and nowhere else.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.compaction.assemble import assemble_compacted
from agent.compaction.boundary import TailPolicy
from agent.compaction.markers import FOLDED_MARK, UNANSWERED_MARK, is_marker
from agent.compaction.micro_cursor import (
    Exchange,
    find_exchanges,
    locate_cursor,
    splice_defrag,
    splice_exchange,
    view_transcript,
)
from agent.compaction.plan import plan_compaction
from agent.errors import CompactionRefused
from agent.messages import (
    ChatMessage,
    assistant_message,
    is_real_user_message,
    system_message,
    tool_message,
    user_message,
)
from agent.tokens import estimate_message_tokens_rough
from agent.turn import build_request

Step = Literal["turn", "tool_turn", "lost", "fold", "fold_span", "defrag", "batch"]
STEPS: tuple[Step, ...] = ("turn", "tool_turn", "lost", "fold", "fold_span", "defrag", "batch")
POLICY = TailPolicy(protect_first_n=2, tail_token_budget=60, protect_last_n=3)


class Session:
    """A transcript as the store would hold it: row ids, and which user rows never got a reply."""

    def __init__(self) -> None:
        self._ids: Iterator[int] = itertools.count(1)
        self.transcript: list[ChatMessage] = [self._stamp(system_message("sys"))]
        self.lost: set[int] = set()

    def _stamp(self, msg: ChatMessage) -> ChatMessage:
        stamped: dict[str, Any] = {**msg, "_id": next(self._ids)}
        return stamped  # type: ignore[return-value]

    def step(self, step: Step, n: int) -> None:
        match step:
            case "turn" | "tool_turn" | "lost":
                self._turn(step, n)
            case "fold" | "fold_span":
                self._fold(span=step == "fold_span")
            case "defrag":
                self._defrag()
            case "batch":
                self._batch()

    def _turn(self, step: Step, n: int) -> None:
        user = self._stamp(user_message(f"question {n} " + "q" * 40))
        self.transcript.append(user)
        if step == "lost":
            self.lost.add(user["_id"])  # type: ignore[typeddict-item]
            return
        if step == "tool_turn":
            call = {"id": f"c{n}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            self.transcript.append(self._stamp(assistant_message(None, [call])))  # type: ignore[list-item]
            self.transcript.append(self._stamp(tool_message(f"c{n}", "t", "out " + "x" * 80)))
        self.transcript.append(self._stamp(assistant_message(f"answer {n} " + "a" * 60)))

    def _view(self) -> Any:
        if not self._finished():
            return None
        tokens = [estimate_message_tokens_rough(m) for m in self.transcript]
        return view_transcript(self.transcript, tokens, POLICY)

    def _finished(self) -> bool:
        last = self.transcript[-1]
        return last.get("role") == "assistant" and not last.get("tool_calls")

    def _fold(self, *, span: bool) -> None:
        view = self._view()
        if view is None:
            return
        cursor = locate_cursor(self.transcript, view, None)
        exchanges = find_exchanges(self.transcript, cursor, view.tail_start)
        if not exchanges:
            return
        last = exchanges[-1] if span else exchanges[0]
        exchange = Exchange(start=exchanges[0].start, end=last.end)
        new, _ = splice_exchange(self.transcript, view, exchange, "rolling summary")
        self.transcript = [m if "_id" in m else self._stamp(m) for m in new]

    def _defrag(self) -> None:
        view = self._view()
        if view is None or view.summary is None:
            return
        new, _ = splice_defrag(self.transcript, view, "defragged summary")
        self.transcript = [m if "_id" in m else self._stamp(m) for m in new]

    def _batch(self) -> None:
        try:
            plan = plan_compaction(
                self.transcript,
                policy=POLICY,
                max_summary_tokens=50,
                limit_tokens=10**6,
                measure=estimate_message_tokens_rough,
            )
        except CompactionRefused:
            return
        new = assemble_compacted(
            plan.head, "batch summary", plan.boundaries.summary_role, plan.tail
        )
        self.transcript = [m if "_id" in m else self._stamp(m) for m in new]


def check_request(session: Session) -> list[ChatMessage]:
    """The request's messages, after asserting every mark in it tells the truth."""
    request = build_request(session.transcript, model="m", tools=(), max_tokens=100, cache_ttl=None)
    messages = list(request.messages)
    for index, message in enumerate(messages[:-1]):
        if not is_real_user_message(message):
            continue
        answer = messages[index + 1]
        lost = message.get("_id") in session.lost
        if answer.get("content") == UNANSWERED_MARK:
            assert lost, f"answered message {message.get('_id')} marked as never answered"
        elif lost:  # a summary after it is no answer, only an account of what followed
            assert answer.get("content") == UNANSWERED_MARK or is_marker(answer), (
                f"lost reply of {message.get('_id')} shown as {answer.get('content')!r}"
            )
        if answer.get("content") == FOLDED_MARK:
            assert not lost
    return messages


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=60))
def test_no_request_marks_an_answered_message_as_unanswered(steps: list[Step]) -> None:
    """Any interleaving of turns, lost replies, folds, defrags and batch compactions: each
    request says "no reply" exactly after the messages whose reply was never stored."""
    session = Session()
    for n, step in enumerate(steps):
        session.step(step, n)
        check_request(session)


def test_answered_turns_folded_by_micro_read_as_folded() -> None:
    """Twelve answered turns, a fold after each: the users before the marker are separated by
    `FOLDED_MARK`, never by `UNANSWERED_MARK` (issue 33 saw up to 5 false marks per request)."""
    session = Session()
    for n in range(12):
        session.step("turn", n)
        session.step("fold", n)
    messages = check_request(session)
    contents = [m.get("content") for m in messages]
    assert UNANSWERED_MARK not in contents
    assert contents.count(FOLDED_MARK) >= 5
    assert sum(1 for m in messages if is_marker(m)) == 1


def test_a_lost_reply_stays_marked_after_micro_folds_past_it() -> None:
    """A reply never stored, then answered turns folded past it: the request still says that
    one message went unanswered, and only that one."""
    session = Session()
    for n, step in enumerate(["turn", "turn", "lost", "turn", "turn", "turn", "turn", "turn"]):
        session.step(step, n)  # type: ignore[arg-type]
    for _ in range(5):
        session.step("fold", 0)
    messages = check_request(session)
    assert [m.get("content") for m in messages].count(UNANSWERED_MARK) == 1
