"""The approval decision table, the question's text, and "Always for this session"."""

from __future__ import annotations

import pytest

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.tools.approval import (
    PolicyMode,
    RiskLevel,
    SessionApprovals,
    decide_action,
    remembering,
    render_request,
)


@pytest.mark.parametrize(
    ("level", "mode", "can_ask", "action"),
    [
        ("safe", "ask", False, "run"),
        ("safe", "deny", False, "run"),
        ("unlisted", "ask", True, "run"),
        ("unlisted", "ask", False, "refuse"),
        ("unlisted", "deny", True, "refuse"),
        ("unlisted", "allow", False, "run"),
        ("opaque", "ask", True, "ask"),
        ("opaque", "ask", False, "refuse"),
        ("opaque", "deny", True, "refuse"),
        ("opaque", "allow", False, "run"),
        ("destructive", "ask", True, "ask"),
        ("destructive", "ask", False, "refuse"),
        ("destructive", "deny", True, "refuse"),
        ("destructive", "allow", True, "ask"),
        ("destructive", "allow", False, "refuse"),
    ],
)
def test_decide_action(level: RiskLevel, mode: PolicyMode, can_ask: bool, action: str) -> None:
    """Allowlist where nobody can approve; destructive verbs need a person in every mode."""
    assert decide_action(level, mode=mode, can_ask=can_ask) == action


def test_the_question_shows_the_command_exactly() -> None:
    """The rendered question ends with the command byte for byte, after the reason."""
    command = "rm -rf 'build dir'/* && echo $HOME\n  # two lines"
    text = render_request(ApprovalRequest(kind="command", subject=command, reason="recursive"))
    assert text.endswith(f"\n\n{command}") and "(recursive)" in text


async def test_always_for_this_session_is_remembered_for_the_same_request_only() -> None:
    """After "session", the same request is granted without asking; another one is asked."""
    asked: list[str] = []
    answers: list[ApprovalAnswer] = ["session", "deny"]

    async def person(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request.subject)
        return answers.pop(0)

    ask = remembering(person, SessionApprovals())
    same = ApprovalRequest(kind="command", subject="git push --force", reason="r")
    other = ApprovalRequest(kind="command", subject="git push --force origin x", reason="r")
    assert await ask(same) == "session"
    assert await ask(same) == "session"
    assert await ask(other) == "deny"
    assert asked == ["git push --force", "git push --force origin x"]
    fresh: list[ApprovalAnswer] = []

    async def again(request: ApprovalRequest) -> ApprovalAnswer:
        fresh.append("deny")
        return "deny"

    assert await remembering(again, SessionApprovals())(same) == "deny" and fresh  # per session


def test_a_tool_call_is_shown_with_its_exact_arguments() -> None:
    """An MCP tool marked for approval: the person sees the tool and the JSON it gets."""
    subject = 'home__unlock_door {"door": "front"}'
    text = render_request(ApprovalRequest(kind="tool", subject=subject, reason="MCP server home"))
    assert text.startswith("⚠️ The agent wants to call this tool (MCP server home)")
    assert text.endswith(subject)
