"""read_file and write_file stay in the workspace: traversal, symlinks, `~`, case tricks, private files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.messages import ToolCall
from agent.tools import ToolContext, ToolRegistry
from agent.tools.builtin import builtin_tools
from agent.tools.workspace import Workspace
from tests.agent.tools.approvers import RecordingApprover


class _Layout:
    """A workspace, a fake home with keys, and a directory outside both."""

    def __init__(self, root: Path) -> None:
        self.ws = root / "ws"
        self.home = root / "home"
        self.outside = root / "outside"
        for d in (self.ws / "src", self.home / ".ssh", self.outside, self.ws / ".git" / "hooks"):
            d.mkdir(parents=True)
        (self.home / ".ssh" / "id_rsa").write_text("-----BEGIN KEY-----\n")
        (self.outside / "notes.txt").write_text("outside notes\n")
        (self.ws / "src" / "app.py").write_text("print('hi')\n")
        self.workspace = Workspace.at(self.ws, home=self.home)


@pytest.fixture
def layout(tmp_path: Path) -> _Layout:
    return _Layout(tmp_path)


def _call(name: str, **arguments: object) -> ToolCall:
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


async def _run(
    layout: _Layout, name: str, approver: RecordingApprover | None = None, **args: object
) -> str:
    ctx = ToolContext(
        session_id="s", cwd=layout.workspace.root, workspace=layout.workspace, approver=approver
    )
    return await ToolRegistry(builtin_tools()).run(_call(name, **args), ctx)


async def test_relative_and_absolute_paths_inside_the_workspace_work(layout: _Layout) -> None:
    """Inside the workspace both tools work without asking anyone."""
    assert "print('hi')" in await _run(layout, "read_file", path="src/app.py")
    target = layout.workspace.root / "src" / "new.py"
    assert (await _run(layout, "write_file", path=str(target), content="x=1\n")).startswith("Wrote")
    assert target.read_text() == "x=1\n"


@pytest.mark.parametrize("path", ["../outside/notes.txt", "src/../../outside/notes.txt"])
async def test_reading_through_dot_dot_needs_approval(layout: _Layout, path: str) -> None:
    """`..` out of the workspace is a read outside it: refused with nobody to ask, else asked."""
    refused = await _run(layout, "read_file", path=path)
    assert refused.startswith("Refused:") and "outside the workspace" in refused
    yes = RecordingApprover("once")
    assert "outside notes" in await _run(layout, "read_file", approver=yes, path=path)
    assert [r.subject for r in yes.asked] == [str(layout.outside.resolve() / "notes.txt")]
    no = RecordingApprover("deny")
    assert (await _run(layout, "read_file", approver=no, path=path)).startswith("Refused:")


@pytest.mark.parametrize("path", ["../outside/evil.txt", "/etc/cron.d/evil", "~/.bashrc"])
async def test_writes_outside_are_refused_even_when_someone_would_allow(
    layout: _Layout, path: str
) -> None:
    """A write outside the workspace is refused outright; nobody is even asked."""
    yes = RecordingApprover("once")
    result = await _run(layout, "write_file", approver=yes, path=path, content="x")
    assert result.startswith("Refused:") and not yes.asked
    assert not (layout.outside / "evil.txt").exists() and not (layout.home / ".bashrc").exists()


async def test_symlink_out_of_the_workspace_is_followed_before_judging(layout: _Layout) -> None:
    """A link inside the workspace that points outside is judged by where it points."""
    (layout.ws / "out").symlink_to(layout.outside, target_is_directory=True)
    written = await _run(layout, "write_file", path="out/planted.txt", content="x")
    assert written.startswith("Refused:") and not (layout.outside / "planted.txt").exists()
    assert (await _run(layout, "read_file", path="out/notes.txt")).startswith("Refused:")


async def test_symlink_to_private_keys_is_refused(layout: _Layout) -> None:
    """`keys -> ~/.ssh` inside the workspace does not make the private key readable."""
    (layout.ws / "keys").symlink_to(layout.home / ".ssh", target_is_directory=True)
    for path in ("keys/id_rsa", "~/.ssh/id_rsa", str(layout.home / ".ssh" / "id_rsa")):
        result = await _run(layout, "read_file", path=path)
        assert result.startswith("Refused:") and "private" in result, path


async def test_dangling_symlink_target_cannot_be_created_outside(layout: _Layout) -> None:
    """Writing through a link to a file that does not exist yet still lands outside: refused."""
    (layout.ws / "later.txt").symlink_to(layout.outside / "created-later.txt")
    result = await _run(layout, "write_file", path="later.txt", content="x")
    assert result.startswith("Refused:") and not (layout.outside / "created-later.txt").exists()


async def test_git_hooks_in_the_workspace_are_persistence(layout: _Layout) -> None:
    """A hook runs code on the next commit: write_file refuses it inside the workspace too."""
    result = await _run(layout, "write_file", path=".git/hooks/pre-commit", content="#!/bin/sh")
    assert result.startswith("Refused:") and "persistence" in result
    assert not (layout.ws / ".git" / "hooks" / "pre-commit").exists()


async def test_case_changed_name_is_another_directory_on_a_case_sensitive_disk(
    layout: _Layout,
) -> None:
    """On Linux `WS/` is not `ws/`: writing there is outside the workspace."""
    twin = layout.ws.parent / "WS"
    twin.mkdir()
    result = await _run(layout, "write_file", path=str(twin / "x.txt"), content="x")
    assert result.startswith("Refused:") and not (twin / "x.txt").exists()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/Work/WS/src/app.py", "inside"),
        ("/work/ws/../WS/src", "inside"),
        ("/work/wsx/app.py", "outside"),
        ("/HOME/me/.SSH/id_rsa", "persistence"),
        ("/home/me/.AWS/credentials", "private"),
        ("/work/ws/.GIT/Hooks/pre-commit", "persistence"),
        ("/work/ws/cafe\u0301.txt", "inside"),
    ],
)
def test_case_insensitive_disks_fold_case_and_unicode(path: str, expected: str) -> None:
    """Where the disk ignores case (macOS), `.SSH`, `WS` and NFD names are the same places."""
    workspace = Workspace(
        root=Path("/work/ws"), home=Path("/home/me"), case_insensitive=True, scratch=()
    )
    assert workspace.classify(Path(os.path.normpath(path))) == expected


@pytest.mark.parametrize("path", ["/etc/shadow", "/proc/self/environ"])
async def test_system_secrets_are_private(layout: _Layout, path: str) -> None:
    """/etc/shadow and our own environment (/proc/self/environ) need approval to read."""
    result = await _run(layout, "read_file", path=path)
    assert result.startswith("Refused:"), result


def test_case_probe_matches_this_filesystem(tmp_path: Path) -> None:
    """The probe reports the disk as it is: here (Linux, ext4 or tmpfs) case matters."""
    probe = tmp_path / "Probe"
    probe.mkdir()
    swapped_exists = (tmp_path / "pROBE").exists()
    assert Workspace.at(probe, home=tmp_path).case_insensitive is swapped_exists
