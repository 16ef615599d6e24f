"""Approvals: what a tool asks a person, the three answers, and when asking is allowed at all.

A tool that wants to do something risky builds an `ApprovalRequest` (the command exactly as it
will run, or the path) and calls `request_approval`. Where nobody can approve (no TTY, the HTTP
API, a chat user who is not an admin) the answer is a refusal with the reason, which goes back to
the model as the tool result. "Always for this session" is remembered per session for the exact
same request (`SessionApprovals`), never for a pattern.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias, assert_never

import structlog

from agent.access import ApprovalAnswer, ApprovalRequest, Approver

__all__ = [
    "ANSWER_LABELS",
    "PolicyMode",
    "RiskLevel",
    "SessionApprovals",
    "ToolAction",
    "decide_action",
    "render_request",
    "remembering",
]

log = structlog.get_logger(__name__)

ToolAction: TypeAlias = Literal["run", "ask", "refuse"]
PolicyMode: TypeAlias = Literal["ask", "deny", "allow"]
RiskLevel: TypeAlias = Literal["safe", "unlisted", "opaque", "destructive"]
"""safe: on the allowlist; unlisted: a program the allowlist does not know; opaque: a construct
the policy cannot see through; destructive: a verb that destroys or persists."""

ANSWER_LABELS: dict[ApprovalAnswer, str] = {
    "once": "Allow once",
    "session": "Always for this session",
    "deny": "Deny",
}


@dataclass(slots=True)
class SessionApprovals:
    """Requests answered "Always for this session"; one per session, in memory only."""

    granted: set[tuple[str, str]] = field(default_factory=set)

    def covers(self, request: ApprovalRequest) -> bool:
        return (request.kind, request.subject) in self.granted

    def grant(self, request: ApprovalRequest) -> None:
        self.granted.add((request.kind, request.subject))


def render_request(request: ApprovalRequest) -> str:
    """The question as shown to a person: what, why, and the exact command or path."""
    match request.kind:
        case "command":
            head = "⚠️ The agent wants to run this command"
        case "read":
            head = "⚠️ The agent wants to read a file outside the workspace"
        case "write":
            head = "⚠️ The agent wants to write this file"
        case "tool":
            head = "⚠️ The agent wants to call this tool"
        case unreachable:
            assert_never(unreachable)
    return f"{head} ({request.reason}):\n\n{request.subject}"


def decide_action(level: RiskLevel, *, mode: PolicyMode, can_ask: bool) -> ToolAction:
    """Run, ask or refuse, from the risk and `tools.approval` (see docs/security-model.md)."""
    if level == "safe":
        return "run"
    match mode:
        case "deny":
            return "refuse"
        case "allow":
            if level != "destructive":
                return "run"
        case "ask":
            if level == "unlisted":
                return "run" if can_ask else "refuse"
        case unreachable:
            assert_never(unreachable)
    return "ask" if can_ask else "refuse"


def remembering(approver: Approver, memory: SessionApprovals) -> Approver:
    """`approver` that answers "session" itself for requests already granted for the session."""

    async def ask(request: ApprovalRequest) -> ApprovalAnswer:
        if memory.covers(request):
            return "session"
        answer = await approver(request)
        if answer == "session":
            memory.grant(request)
        log.info("approval_answered", kind=request.kind, answer=answer, reason=request.reason)
        return answer

    return ask
