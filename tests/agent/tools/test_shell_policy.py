"""The shell policy's levels and reasons, table by table (the corpus test runs the real tool)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from agent.tools.shell_parse import expand_braces, parse_script
from agent.tools.shell_policy import assess_command
from agent.tools.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    return Workspace.at(tmp_path / "ws", home=tmp_path / "home")


@pytest.mark.parametrize(
    ("command", "level", "fragment"),
    [
        ("ls -la && git status", "safe", ""),
        ("htop", "unlisted", "`htop` is not on the allowlist"),
        ("git frobnicate", "unlisted", "`git frobnicate`"),
        ("python -m mymodule", "unlisted", "python -m mymodule"),
        ("$(echo rm) -rf /", "opaque", "command name is computed"),
        ("echo x | bash", "opaque", "pipes a script into bash"),
        ("eval ls", "opaque", "`eval`"),
        ("LD_PRELOAD=x.so ls", "opaque", "LD_PRELOAD"),
        ("cat ~/.ssh/id_rsa", "opaque", "private file"),
        ("echo x > $F", "opaque", "cannot resolve"),
        ("nice --weird rm x", "opaque", "cannot see past `nice`"),
        ("rm -rf build", "destructive", "recursive delete of build"),
        ("rm -f x.pyc", "destructive", "forced delete"),
        ("git reset --hard", "destructive", "git reset --hard"),
        ("kill 1234", "destructive", "kills processes"),
        ("sudo ls", "destructive", "runs as root"),
        ("echo x > /etc/motd", "destructive", "persistence file (/etc/motd)"),
        ("echo x > /srv/out.txt", "destructive", "outside the workspace"),
        ("echo x > /dev/sda", "destructive", "a device"),
    ],
)
def test_levels_and_reasons(workspace: Workspace, command: str, level: str, fragment: str) -> None:
    """Each construct gets its level and a reason that says what it saw."""
    verdict = assess_command(command, cwd=workspace.root, workspace=workspace)
    assert verdict.level == level, verdict
    assert fragment in verdict.reason


def test_the_worst_finding_wins_and_reasons_keep_their_order(workspace: Workspace) -> None:
    """Several findings: the level is the worst; every reason at that level is kept."""
    verdict = assess_command(
        "htop; eval x; rm -rf a; kill 1", cwd=workspace.root, workspace=workspace
    )
    assert verdict.level == "destructive"
    assert verdict.reasons == ("recursive delete of a", "`kill` kills processes")


@pytest.mark.parametrize(
    ("command", "level"),
    [
        ("cd /etc && rm passwd", "destructive"),
        ("cd src && rm old.py", "safe"),
        ("cd $DIR && rm x", "opaque"),
        ("(cd /etc); rm passwd", "destructive"),
        ("cd - && rm x", "opaque"),
    ],
)
def test_cd_moves_where_relative_paths_land(workspace: Workspace, command: str, level: str) -> None:
    """After `cd`, relative paths are judged from every directory the shell may be in."""
    (workspace.root / "src").mkdir()
    assert assess_command(command, cwd=workspace.root, workspace=workspace).level == level


def test_a_symlink_in_the_workspace_is_judged_by_its_target(
    workspace: Workspace, tmp_path: Path
) -> None:
    """`> link/x` where link points outside is a write outside the workspace."""
    (tmp_path / "elsewhere").mkdir()
    (workspace.root / "link").symlink_to(tmp_path / "elsewhere")
    strict = replace(workspace, scratch=())  # tmp_path lives in /tmp, which is scratch
    verdict = assess_command("echo x > link/f", cwd=workspace.root, workspace=strict)
    assert verdict.level == "destructive" and "outside the workspace" in verdict.reason
    direct = assess_command("echo x > f", cwd=workspace.root, workspace=strict)
    assert direct.level == "safe"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("\\rm -r''f \"~\" ~/x", [["rm", "-rf", "~", "HOME/x"]]),
        ("$'\\x72\\x6d' a", [["rm", "a"]]),
        (
            "mkdir -p src/{a,b}/{1..2}",
            [["mkdir", "-p", "src/a/1", "src/a/2", "src/b/1", "src/b/2"]],
        ),
        ('echo "$HOME/x" \'$HOME\' "$OTHER"', [["echo", "HOME/x", "$HOME", None]]),
        ("a | b; c $(d e)", [["a"], ["b"], ["c", None], ["d", "e"]]),
    ],
)
def test_words_after_quote_removal(command: str, words: list[list[str | None]]) -> None:
    """Quotes, escapes, ANSI-C strings, `~`, known variables and brace expansion resolve."""
    parsed = parse_script(command, env={"HOME": "HOME"})
    assert [[w.value for w in c.words] for c in parsed.commands] == words


def test_pipes_here_documents_and_substitutions_are_marked() -> None:
    """A command knows whether its input is a pipe or inline text; substitutions are their own."""
    parsed = parse_script("cat <<EOF | sh\nx\nEOF\nbash <<< 'y'", env={})
    cat, sh, bash = parsed.commands
    assert cat.inline_input and not cat.piped_in
    assert sh.piped_in and bash.inline_input and not parsed.problems


def test_unparseable_text_and_recursion_are_problems() -> None:
    """Text that is not bash, and a function calling itself, are reported, never guessed."""
    assert parse_script("echo 'open", env={}).problems
    assert "calls itself" in parse_script("f() { f | f & }; f", env={}).problems[0]


def test_brace_expansion_is_bounded() -> None:
    """A brace expansion that would explode is refused as unknown."""
    assert expand_braces("{a,b}{1..3}") == ["a1", "a2", "a3", "b1", "b2", "b3"]
    assert expand_braces("{1..100}{1..100}") is None
    assert expand_braces("no braces") == ["no braces"]
