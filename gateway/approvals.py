"""Approvals asked in a chat: open questions by id, a button press that answers one, the deadline.

Telegram and Discord adapters share this: they send the question with three buttons whose data
is `button_data(id, answer)`, hand each press to `PendingApprovals.press`, and wait with
`PendingApprovals.wait`, which turns silence into "deny". Only a user the question's
`may_answer` accepts (an admin of that platform) can answer; anyone else is told so and the
question stays open.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from agent.access import ApprovalAnswer
from agent.tools.approval import ANSWER_LABELS

__all__ = [
    "BUTTONS",
    "PRESS_TEXTS",
    "ApprovalOutcome",
    "PendingApprovals",
    "PressResult",
    "button_data",
    "outcome_line",
    "parse_button_data",
]

_PREFIX = "hx"
_CODES: dict[ApprovalAnswer, str] = {"once": "o", "session": "s", "deny": "d"}
_ANSWERS = {code: answer for answer, code in _CODES.items()}
BUTTONS: tuple[ApprovalAnswer, ...] = ("once", "session", "deny")
"""The three choices, in the order they are shown."""

PressResult: TypeAlias = Literal["accepted", "not_allowed", "expired"]
PRESS_TEXTS: dict[PressResult, str] = {
    "accepted": "Answer recorded.",
    "not_allowed": "Only an admin can answer this.",
    "expired": "This question is no longer open.",
}
"""What the person who pressed a button is told (a toast or an ephemeral reply)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalOutcome:
    """How a question ended."""

    answer: ApprovalAnswer
    by: str | None
    """Who pressed the button (a name or id); None when the deadline passed."""


@dataclass(slots=True)
class _Open:
    future: asyncio.Future[ApprovalOutcome]
    may_answer: Callable[[str], bool]


def button_data(approval_id: str, answer: ApprovalAnswer) -> str:
    """The button's payload: `hx:<id>:<o|s|d>` (short: Telegram allows 64 bytes)."""
    return f"{_PREFIX}:{approval_id}:{_CODES[answer]}"


def parse_button_data(data: str | None) -> tuple[str, ApprovalAnswer] | None:
    """(id, answer) from a button payload; None for anything that is not ours."""
    parts = (data or "").split(":")
    if len(parts) != 3 or parts[0] != _PREFIX or parts[2] not in _ANSWERS:
        return None
    return parts[1], _ANSWERS[parts[2]]


def outcome_line(outcome: ApprovalOutcome, *, timeout_s: float) -> str:
    """The line appended to the question once it is settled."""
    if outcome.by is None:
        return f"⌛ No answer within {timeout_s:g} s: denied."
    mark = "❌" if outcome.answer == "deny" else "✅"
    return f"{mark} {ANSWER_LABELS[outcome.answer]} — {outcome.by}"


class PendingApprovals:
    """The questions one adapter has open; each is answered at most once."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}

    def open(self, may_answer: Callable[[str], bool]) -> str:
        approval_id = secrets.token_hex(6)
        future: asyncio.Future[ApprovalOutcome] = asyncio.get_running_loop().create_future()
        self._open[approval_id] = _Open(future=future, may_answer=may_answer)
        return approval_id

    def press(
        self, approval_id: str, answer: ApprovalAnswer, *, user_id: str, name: str
    ) -> PressResult:
        """A button was pressed by `user_id`: settle the question if they may answer it."""
        pending = self._open.get(approval_id)
        if pending is None or pending.future.done():
            return "expired"
        if not pending.may_answer(user_id):
            return "not_allowed"
        pending.future.set_result(ApprovalOutcome(answer=answer, by=name))
        return "accepted"

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalOutcome:
        """The answer, or a denial when nobody allowed to answer did so in `timeout_s`."""
        pending = self._open[approval_id]
        try:
            async with asyncio.timeout(timeout_s):
                return await pending.future
        except TimeoutError:
            return ApprovalOutcome(answer="deny", by=None)
        finally:
            self._open.pop(approval_id, None)

    def close(self, approval_id: str) -> None:
        """Forget a question that could not be asked."""
        self._open.pop(approval_id, None)

    def __len__(self) -> int:
        return len(self._open)
