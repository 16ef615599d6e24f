"""Where a command runs: `place_command`'s table, and the terminal tool acting on it.

Contract (docs/sandbox.md): with `tools.terminal.sandbox: auto` every command runs in bubblewrap;
where a person can approve, the model may ask for one command outside it and the person is
asked (with the policy's own question, once); where nobody can approve that is refused, and a
missing bubblewrap refuses every command with how to install it (never a bare run). `bwrap`
never runs outside; `none` is the explicit opt-out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.access import Principal
from agent.messages import ToolCall
from agent.tools import ToolContext, ToolRegistry
from agent.tools.sandbox import (
    INSTALL_HINT,
    Placement,
    SandboxMode,
    TerminalSettings,
    bwrap_problem,
    mount_order,
    place_command,
)
from agent.tools.terminal import terminal_tool
from agent.tools.workspace import Workspace
from tests.agent.tools.approvers import RecordingApprover

PROBLEM = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"bwrap unusable: {PROBLEM}")
MISSING = "bubblewrap (bwrap) is not installed"


@pytest.mark.parametrize(
    ("mode", "missing", "can_ask", "outside", "where", "ask"),
    [
        ("auto", None, False, False, "sandbox", None),
        ("auto", None, True, False, "sandbox", None),
        ("auto", None, True, True, "host", "outside the sandbox"),
        ("auto", None, False, True, "refuse", None),
        ("auto", MISSING, False, False, "refuse", None),
        ("auto", MISSING, True, False, "host", None),
        ("bwrap", None, True, True, "refuse", None),
        ("bwrap", None, False, False, "sandbox", None),
        ("bwrap", MISSING, True, False, "refuse", None),
        ("none", None, False, False, "host", None),
        ("none", MISSING, False, True, "host", None),
    ],
)
def test_placement_table(
    mode: SandboxMode,
    missing: str | None,
    can_ask: bool,
    outside: bool,
    where: str,
    ask: str | None,
) -> None:
    """Sandbox, host or refusal, and whether running outside needs a person's yes."""
    settings = TerminalSettings(sandbox=mode, bwrap_missing=missing)
    placement = place_command(settings, can_ask=can_ask, outside=outside)
    assert (placement.where, placement.ask) == (where, ask)
    if where == "refuse":
        assert placement.reason
    if missing is not None and where == "refuse":
        assert INSTALL_HINT in placement.reason


def test_mounts_hide_what_lies_inside_the_workspace_and_keep_a_workspace_in_the_home() -> None:
    """Outermost first; at the same depth the bind precedes the tmpfs, so hiding wins."""
    order = mount_order(Path("/h/u/ws"), hidden=(Path("/h/u"), Path("/h/u/ws/.hermes")))
    paths = [(str(p), k) for p, k in order]
    assert paths.index(("/h/u", "tmpfs")) < paths.index(("/h/u/ws", "bind"))
    assert paths.index(("/h/u/ws", "bind")) < paths.index(("/h/u/ws/.hermes", "tmpfs"))
    same = [(str(p), k) for p, k in mount_order(Path("/x"), hidden=(Path("/x"),))]
    assert same.index(("/x", "bind")) < same.index(("/x", "tmpfs"))


def _call(command: str, **more: object) -> ToolCall:
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": "terminal", "arguments": json.dumps({"command": command, **more})},
    }


def _ctx(
    tmp_path: Path, settings: TerminalSettings, approver: RecordingApprover | None
) -> ToolContext:
    workspace = Workspace.at(tmp_path / "ws", home=tmp_path / "home")
    principal = Principal.operator(["terminal"], can_approve=approver is not None)
    return ToolContext(
        session_id="s",
        cwd=workspace.root,
        workspace=workspace,
        principal=principal,
        approver=approver,
        terminal=settings,
        timeout_s=10.0,
    )


@needs_bwrap
async def test_the_interactive_chat_runs_in_the_sandbox_and_asks_to_leave_it(
    tmp_path: Path,
) -> None:
    """The terminal chat (someone can approve): a plain command runs sandboxed without a
    question; `outside_sandbox` asks once, and only a yes runs it on the host."""
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "mine.txt").write_text("the owner's file\n")
    settings = TerminalSettings(env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")})
    tools = ToolRegistry([terminal_tool()])
    inside = RecordingApprover("deny")
    sandboxed = await tools.run(_call("cat ~/mine.txt"), _ctx(tmp_path, settings, inside))
    assert "No such file" in sandboxed and "owner" not in sandboxed and not inside.asked
    denied = RecordingApprover("deny")
    refusal = await tools.run(
        _call("cat ~/mine.txt", outside_sandbox=True), _ctx(tmp_path, settings, denied)
    )
    assert refusal.startswith("Refused: the user declined") and "owner" not in refusal
    assert [(r.subject, r.reason) for r in denied.asked] == [
        ("cat ~/mine.txt", "outside the sandbox")
    ]
    allowed = RecordingApprover("once")
    result = await tools.run(
        _call("cat ~/mine.txt", outside_sandbox=True), _ctx(tmp_path, settings, allowed)
    )
    assert result == "the owner's file\n[exit code 0]" and len(allowed.asked) == 1


@needs_bwrap
async def test_one_question_covers_the_policy_and_leaving_the_sandbox(tmp_path: Path) -> None:
    """A command the policy would ask about, outside the sandbox: one question naming both."""
    settings = TerminalSettings(env={"PATH": "/usr/bin:/bin"})
    approver = RecordingApprover("deny")
    await ToolRegistry([terminal_tool()]).run(
        _call("git push --force", outside_sandbox=True), _ctx(tmp_path, settings, approver)
    )
    assert len(approver.asked) == 1
    assert approver.asked[0].reason.startswith("outside the sandbox; ")


async def test_without_bubblewrap_unattended_commands_are_refused_with_how_to_install(
    tmp_path: Path,
) -> None:
    """Nobody can approve and bwrap is missing: even `echo` is refused, never run bare, and the
    refusal says how to install bubblewrap."""
    marker = tmp_path / "ws" / "ran"
    settings = TerminalSettings(env={"PATH": "/usr/bin:/bin"}, bwrap_missing=MISSING)
    result = await ToolRegistry([terminal_tool()]).run(
        _call(f"touch {marker}"), _ctx(tmp_path, settings, None)
    )
    assert result.startswith("Refused:") and "apt-get install bubblewrap" in result
    assert not marker.exists()


async def test_outside_the_sandbox_is_refused_where_nobody_can_approve(tmp_path: Path) -> None:
    """An HTTP key asking for `outside_sandbox` gets a refusal and nothing runs."""
    marker = tmp_path / "ws" / "ran"
    settings = TerminalSettings(env={"PATH": "/usr/bin:/bin"})
    result = await ToolRegistry([terminal_tool()]).run(
        _call(f"touch {marker}", outside_sandbox=True), _ctx(tmp_path, settings, None)
    )
    assert result.startswith("Refused:") and "nobody can approve" in result
    assert not marker.exists()


async def test_a_workspace_holding_the_home_is_not_sandboxed(tmp_path: Path) -> None:
    """A workspace that holds the home would hand the home to the command: refused, not run."""
    workspace = Workspace(root=_real(tmp_path), home=_real(tmp_path / "home"))
    ctx = ToolContext(
        session_id="s",
        cwd=workspace.root,
        workspace=workspace,
        terminal=TerminalSettings(env={"PATH": "/usr/bin:/bin"}, bwrap_missing=None),
    )
    result = await ToolRegistry([terminal_tool()]).run(_call("touch ran"), ctx)
    assert result.startswith("Refused: the workspace") and not (tmp_path / "ran").exists()


def _real(path: Path) -> Path:
    return path.resolve()


def test_placement_is_a_value() -> None:
    """A placement is a frozen value the tool dispatches on."""
    assert Placement(where="sandbox") == Placement(where="sandbox")
