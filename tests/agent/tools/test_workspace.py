"""Workspace classification: inside, scratch, outside, private, persistence, devices."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.tools.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    hermes_home = tmp_path / "hermes"
    return Workspace(
        root=Path(os.path.realpath(tmp_path)) / "hermes" / "workspace",
        home=Path("/home/me"),
        private_extra=(Path(os.path.realpath(hermes_home)),),
    )


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("WS/src/app.py", "inside"),
        ("HH/config.yaml", "private"),
        ("HH/state.db", "private"),
        ("/home/me/.ssh/id_rsa", "persistence"),
        ("/home/me/.aws/credentials", "private"),
        ("/home/me/.bashrc", "persistence"),
        ("/home/me/notes.txt", "outside"),
        ("/etc/hosts", "persistence"),
        ("/etc/shadow", "persistence"),
        ("/proc/123/environ", "private"),
        ("/dev/null", "null"),
        ("/dev/fd/3", "null"),
        ("/dev/sda", "device"),
        ("/var/tmp/x", "scratch"),
        ("/srv/data", "outside"),
        ("WS/.git/hooks/pre-push", "persistence"),
        ("WS/.git/config", "persistence"),
        ("WS/.github/workflows/ci.yml", "inside"),
    ],
)
def test_classify(workspace: Workspace, where: str, expected: str) -> None:
    """HERMES_HOME is private except the workspace inside it; the rest as the table says."""
    path = where.replace("WS", str(workspace.root)).replace("HH", str(workspace.private_extra[0]))
    assert workspace.classify(Path(path)) == expected


def test_the_home_is_never_scratch_even_under_tmp(tmp_path: Path) -> None:
    """A home that lives under /tmp (CI, containers) still counts as outside, not scratch."""
    home = Path(os.path.realpath(tmp_path)) / "home"
    ws = Workspace(root=home / "proj", home=home)
    assert ws.classify(home / "notes.txt") == "outside"
    assert ws.classify(Path("/tmp/other-scratch")) == "scratch"


def test_resolve_expands_tilde_against_the_workspace_home(tmp_path: Path) -> None:
    """`~` is the real home the workspace was given, not whatever $HOME says in a test."""
    ws = Workspace(root=tmp_path, home=Path("/home/me"))
    assert ws.resolve(tmp_path, "~/x") == Path("/home/me/x")
    assert ws.resolve(tmp_path, "a/../b") == Path(os.path.realpath(tmp_path)) / "b"
