"""The shell corpus through the real terminal tool, with a recording stand-in for bash.

The tool's shell is replaced by a two-line script that writes the command it was handed to a
file and exits 0, so nothing in the corpus ever runs on this machine; the policy, the decision,
the approval path, the sandbox (default settings: the stand-in and its record live in the
workspace, the one place the sandbox lets it write) and the subprocess start are the real ones.
What the commands would do if they ran is judged by effects in `test_sandbox_corpus.py`. Dangerous commands must be
refused where nobody can approve (the stand-in is never started) and asked, with the exact
command, where someone can; benign ones must reach the shell without anyone being asked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.messages import ToolCall
from agent.tools import ToolContext, ToolRegistry
from agent.tools.sandbox import TerminalSettings
from agent.tools.terminal import terminal_tool
from agent.tools.workspace import Workspace
from tests.agent.tools.approvers import RecordingApprover
from tests.agent.tools.shell_corpus import BENIGN, DANGEROUS, ISSUE_18


class _Bench:
    """A workspace, a home, and a stand-in shell that records instead of running."""

    def __init__(self, root: Path) -> None:
        (root / "home" / ".ssh").mkdir(parents=True)
        self.workspace = Workspace.at(root / "ws", home=root / "home")
        self.record = self.workspace.root / ".recorded.txt"
        shell = self.workspace.root / ".stand-in-shell"
        shell.write_text(f"#!/bin/sh\nprintf '%s' \"$2\" > '{self.record}'\n")
        shell.chmod(0o755)
        self.terminal = TerminalSettings(shell=str(shell), env={"PATH": "/usr/bin:/bin"})

    async def run(self, command: str, approver: RecordingApprover | None) -> str:
        ctx = ToolContext(
            session_id="corpus",
            cwd=self.workspace.root,
            workspace=self.workspace,
            terminal=self.terminal,
            approver=approver,
            timeout_s=10.0,
        )
        call: ToolCall = {
            "id": "c1",
            "type": "function",
            "function": {"name": "terminal", "arguments": json.dumps({"command": command})},
        }
        return await ToolRegistry([terminal_tool()]).run(call, ctx)

    def recorded(self) -> str | None:
        return self.record.read_text() if self.record.exists() else None


@pytest.fixture
def bench(tmp_path: Path) -> _Bench:
    return _Bench(tmp_path)


def test_the_corpus_is_big_enough() -> None:
    """At least 150 dangerous commands (every bypass of issue 18 among them), 100 benign ones."""
    assert len(DANGEROUS) >= 150 and len(set(DANGEROUS)) == len(DANGEROUS)
    assert len(BENIGN) >= 100 and len(set(BENIGN)) == len(BENIGN)
    assert set(ISSUE_18) <= set(DANGEROUS) and not set(DANGEROUS) & set(BENIGN)


@pytest.mark.parametrize("command", DANGEROUS)
async def test_dangerous_is_refused_where_nobody_can_approve(bench: _Bench, command: str) -> None:
    """No approver: the command is refused with a reason and the shell is never started."""
    result = await bench.run(command, approver=None)
    assert result.startswith("Refused:") and "It was not run." in result, result
    assert bench.recorded() is None


@pytest.mark.parametrize("command", DANGEROUS)
async def test_dangerous_is_asked_where_someone_can(bench: _Bench, command: str) -> None:
    """With an approver the exact command is asked once; a denial keeps it from the shell."""
    approver = RecordingApprover("deny")
    result = await bench.run(command, approver=approver)
    assert [r.subject for r in approver.asked] == [command]
    assert result.startswith("Refused: the user declined") and bench.recorded() is None


@pytest.mark.parametrize("command", ISSUE_18[:6])
async def test_an_allowed_dangerous_command_reaches_the_shell_unchanged(
    bench: _Bench, command: str
) -> None:
    """ "Allow once" hands the stand-in exactly the command that was shown."""
    approver = RecordingApprover("once")
    await bench.run(command, approver=approver)
    assert bench.recorded() == command == approver.asked[0].subject


@pytest.mark.parametrize("command", BENIGN)
@pytest.mark.parametrize("someone_can_approve", [False, True])
async def test_benign_runs_without_asking(
    bench: _Bench, command: str, someone_can_approve: bool
) -> None:
    """Everyday developer commands reach the shell as written, and nobody is asked."""
    approver = RecordingApprover("deny") if someone_can_approve else None
    result = await bench.run(command, approver=approver)
    assert bench.recorded() == command, result
    assert result.endswith("[exit code 0]") and not (approver and approver.asked)
