"""File-tool chains that would run code later (issue 32), and the workspace never being HOME.

- gitdir: `write_file sub/.git` (`gitdir: ../evilgit`) plus an `evilgit/config` with
  `core.fsmonitor` made the next `git -C sub status` run a command. Both writes are refused; and
  where such a repository arrives anyway (a clone), the hook runs only inside the sandbox.
- .pth: a `.pth` file in any site-packages (a project's `.venv` included) runs code at every
  Python start; so do `sitecustomize.py` and `usercustomize.py`. Refused anywhere.
- HOME: started in `~` without `tools.workspace`, the tools work in HERMES_HOME/workspace (a
  one-line note says so), so `~/.local/bin/git`, `~/.vimrc`, `~/.config/pip/pip.conf` and
  `~/.local/lib/…/zz.pth` are outside it; and the same start-up paths inside a workspace are
  refused as they would be in a home.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agent.access import Principal
from agent.messages import ToolCall
from agent.tools import ToolContext, ToolRegistry
from agent.tools.builtin import builtin_tools
from agent.tools.files import git_config_hazard
from agent.tools.sandbox import TerminalSettings, bwrap_problem
from agent.tools.workspace import Workspace
from cli.runtime import Runtime
from sim.llm_server import FakeLLM
from tests.gateway.harness import make_config

PROBLEM = bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"bwrap unusable: {PROBLEM}")
UNATTENDED = Principal(platform="http", id="k", tools=frozenset({"terminal", "write_file"}))


def _call(name: str, **arguments: object) -> ToolCall:
    return {
        "id": "c",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _ctx(workspace: Workspace, home: Path) -> ToolContext:
    return ToolContext(
        session_id="s",
        cwd=workspace.root,
        workspace=workspace,
        principal=UNATTENDED,
        terminal=TerminalSettings(env={"PATH": "/usr/bin:/bin", "HOME": str(home)}),
        timeout_s=20.0,
    )


async def _run(ctx: ToolContext, name: str, **arguments: object) -> str:
    return await ToolRegistry(builtin_tools()).run(_call(name, **arguments), ctx)


def _exists(path: Path) -> bool:
    return path.exists()


@pytest.fixture
def bench(tmp_path: Path) -> tuple[Workspace, Path]:
    home = tmp_path / "home"
    home.mkdir()
    return Workspace.at(tmp_path / "ws", home=home), home


async def test_the_gitdir_chain_is_refused_by_the_file_tool(
    bench: tuple[Workspace, Path],
) -> None:
    """Neither the `.git` pointer nor the config with `core.fsmonitor` is written, and the
    next `git status` runs nothing."""
    workspace, home = bench
    ctx = _ctx(workspace, home)
    marker = workspace.root / "fsmonitor-ran"
    pointer = await _run(ctx, "write_file", path="sub/.git", content="gitdir: ../evilgit\n")
    config = await _run(
        ctx,
        "write_file",
        path="evilgit/config",
        content=f"[core]\n\tbare = false\n\tfsmonitor = touch {marker}\n",
    )
    assert pointer.startswith("Refused:") and config.startswith("Refused:"), (pointer, config)
    assert not _exists(workspace.root / "sub" / ".git")
    assert not _exists(workspace.root / "evilgit" / "config")
    await _run(ctx, "write_file", path="sub/readme.txt", content="hello\n")
    await _run(ctx, "terminal", command="git -C sub status")
    assert not _exists(marker)


@pytest.mark.parametrize(
    ("name", "content", "hazard"),
    [
        ("config", "[core]\n\tfsmonitor = sh -c id\n", True),
        ("config", "[core]\n  pager = less; id\n", True),
        ("config", '[alias]\n\tst = "!sh -c id"\n', True),
        ("x.gitconfig", "[core]\n\tsshCommand = ssh -oProxyCommand=id\n", True),
        ("config", "[user]\n\tname = Ada\n", False),
        ("config", "fsmonitor = 1 (no section: not git config)", False),
        ("settings.ini", "[core]\n\tfsmonitor = x\n", False),
    ],
)
def test_git_config_hazard(name: str, content: str, hazard: bool) -> None:
    """git config that makes git run a program is recognised by name and content."""
    assert (git_config_hazard(Path("/w") / name, content) is not None) is hazard


@needs_bwrap
async def test_a_planted_gitdir_chain_runs_only_inside_the_sandbox(
    bench: tuple[Workspace, Path],
) -> None:
    """A repository that arrives with the chain (say, cloned): `git status` runs the hook, but
    in the sandbox, so it can write the workspace and nothing in the home."""
    workspace, home = bench
    inside, outside = workspace.root / "hook-ran", home / "owned"
    _plant_gitdir_chain(workspace.root, hook=f"touch {inside}; touch {outside}")
    await _run(_ctx(workspace, home), "terminal", command="git -C sub status")
    assert _exists(inside), "the hook did not run: the test would prove nothing"
    assert not _exists(outside)


@pytest.mark.parametrize(
    "path",
    [
        ".venv/lib/python3.11/site-packages/zz.pth",
        "lib/zz.pth",
        "sitecustomize.py",
        "src/usercustomize.py",
        ".local/lib/python3.11/site-packages/zz.pth",
        ".local/bin/git",
        ".bashrc",
        ".vimrc",
        ".config/pip/pip.conf",
        ".config/autostart/evil.desktop",
        ".git/hooks/pre-commit",
        "pkg/.git",
    ],
)
async def test_start_up_paths_inside_the_workspace_are_refused(
    bench: tuple[Workspace, Path], path: str
) -> None:
    """Files that run code later are refused inside the workspace as they are in a home."""
    workspace, home = bench
    result = await _run(_ctx(workspace, home), "write_file", path=path, content="import os\n")
    assert result.startswith("Refused:") and "Not written." in result
    assert not _exists(workspace.root / path)


@needs_bwrap
async def test_the_pth_chain_runs_nothing(bench: tuple[Workspace, Path]) -> None:
    """`write_file …/zz.pth` is refused, so the next `python3 --version` in a venv runs no
    code of it (the venv's own python is the one that would read it)."""
    workspace, home = bench
    ctx = _ctx(workspace, home)
    marker = workspace.root / "pth-ran"
    await _run(ctx, "terminal", command="python3 -m venv --without-pip .venv", timeout_s=30)
    site = next((workspace.root / ".venv" / "lib").glob("python3*/site-packages"))
    relative = site.relative_to(workspace.root) / "zz.pth"
    code = f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n"
    result = await _run(ctx, "write_file", path=str(relative), content=code)
    assert result.startswith("Refused:")
    await _run(ctx, "terminal", command=".venv/bin/python3 --version")
    assert not _exists(marker)


async def test_started_in_home_the_workspace_is_hermes_home_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hermes` started in ~ without tools.workspace: the tools work in HERMES_HOME/workspace,
    a note says so, and `~/.local/bin/git`, `~/.vimrc`, `~/.config/pip/pip.conf` and a `.pth`
    under `~/.local` are refused as outside the workspace."""
    home, hermes_home = tmp_path / "home", tmp_path / "home" / ".hermes"
    hermes_home.mkdir(parents=True)
    monkeypatch.chdir(home)
    async with FakeLLM() as llm:
        config = make_config(llm, hermes_home / "state.db", tools={"enabled": ["write_file"]})
        async with await Runtime.start(config, hermes_home, {"HOME": str(home)}) as runtime:
            ctx = runtime.deps.tool_context
            notices = runtime.notices
            results = {
                path: await ToolRegistry(builtin_tools()).run(
                    _call("write_file", path=path, content="x\n"), ctx
                )
                for path in (
                    "~/.local/bin/git",
                    "~/.vimrc",
                    "~/.config/pip/pip.conf",
                    "~/.local/lib/python3.11/site-packages/zz.pth",
                )
            }
    assert ctx.workspace is not None
    assert ctx.workspace.root == _real(hermes_home / "workspace")
    assert any(str(hermes_home / "workspace") in n and "started in" in n for n in notices)
    assert all(r.startswith("Refused:") for r in results.values()), results
    assert not _exists(home / ".vimrc") and not _exists(home / ".local")


async def test_a_configured_workspace_that_is_home_stops_start_up(
    tmp_path: Path,
) -> None:
    """`tools.workspace: ~` is a config error naming the setting, not a silent HOME workspace."""
    from agent.errors import ConfigError

    home = tmp_path / "home"
    home.mkdir()
    async with FakeLLM() as llm:
        config = make_config(llm, tmp_path / "state.db", tools={"workspace": str(home)})
        with pytest.raises(ConfigError, match="tools.workspace"):
            await Runtime.start(config, tmp_path / "hermes", {"HOME": str(home)})


def _plant_gitdir_chain(root: Path, *, hook: str) -> None:
    """`sub/.git` pointing at `evilgit`, whose config runs `hook` as its fsmonitor."""
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: ../evilgit\n")
    subprocess.run(["git", "init", "-q", "--bare", str(root / "evilgit")], check=True)
    config = str(root / "evilgit" / "config")
    subprocess.run(["git", "config", "-f", config, "core.bare", "false"], check=True)
    subprocess.run(["git", "config", "-f", config, "core.fsmonitor", hook], check=True)


def _real(path: Path) -> Path:
    return path.resolve()
