"""Discord approvals: a message with three buttons, answered by an admin's press, or the deadline.

The question is a message with one action row of buttons (`discord.ui.View`); a press arrives as
an `INTERACTION_CREATE` of type 3 (message component), which discord.py routes to the view. An
admin's press is answered with an UPDATE_MESSAGE response (the outcome replaces the buttons);
anyone else gets an ephemeral notice and the question stays open. At the deadline the message
is edited: no buttons, "no answer: denied". The text is markdown-escaped so the command reads
exactly as it will run.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import discord
import structlog

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.tools.approval import ANSWER_LABELS, render_request
from gateway.approvals import (
    BUTTONS,
    PRESS_TEXTS,
    ApprovalOutcome,
    PendingApprovals,
    button_data,
    outcome_line,
)

__all__ = ["ApprovalView", "approval_text"]

log = structlog.get_logger(__name__)

_STYLES: dict[ApprovalAnswer, discord.ButtonStyle] = {
    "once": discord.ButtonStyle.success,
    "session": discord.ButtonStyle.primary,
    "deny": discord.ButtonStyle.danger,
}


def approval_text(request: ApprovalRequest) -> str:
    """The question as Discord content: markdown-escaped, so `*` and `_` show as typed."""
    return discord.utils.escape_markdown(render_request(request))


class ApprovalView(discord.ui.View):
    """The three buttons of one question; presses go to the adapter's `PendingApprovals`."""

    def __init__(
        self, approvals: PendingApprovals, approval_id: str, *, text: str, timeout_s: float
    ) -> None:
        super().__init__(timeout=None)  # the deadline is PendingApprovals.wait's
        self._approvals = approvals
        self._id = approval_id
        self._text = text
        self._timeout_s = timeout_s
        for answer in BUTTONS:
            button: discord.ui.Button[ApprovalView] = discord.ui.Button(
                label=ANSWER_LABELS[answer],
                style=_STYLES[answer],
                custom_id=button_data(approval_id, answer),
            )
            button.callback = self._on_press(answer)  # type: ignore[method-assign,assignment]
            self.add_item(button)

    def _on_press(
        self, answer: ApprovalAnswer
    ) -> Callable[[discord.Interaction], Coroutine[Any, Any, None]]:
        async def pressed(interaction: discord.Interaction) -> None:
            user = interaction.user
            result = self._approvals.press(self._id, answer, user_id=str(user.id), name=user.name)
            log.info("approval_button_pressed", result=result)
            if result != "accepted":
                await interaction.response.send_message(PRESS_TEXTS[result], ephemeral=True)
                return
            outcome = ApprovalOutcome(answer=answer, by=user.name)
            await interaction.response.edit_message(content=self.settled_text(outcome), view=None)
            self.stop()

        return pressed

    def settled_text(self, outcome: ApprovalOutcome) -> str:
        line = discord.utils.escape_markdown(outcome_line(outcome, timeout_s=self._timeout_s))
        return f"{self._text}\n\n{line}"
