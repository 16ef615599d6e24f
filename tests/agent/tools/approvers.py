"""A scripted stand-in for the person who answers approvals, shared by the tool tests."""

from __future__ import annotations

from agent.access import ApprovalAnswer, ApprovalRequest

__all__ = ["RecordingApprover"]


class RecordingApprover:
    """Answers every request the same way and remembers what it was asked."""

    def __init__(self, answer: ApprovalAnswer) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request)
        return self.answer
