"""House rules that a review can miss: docstrings, module size, layering, cycles, closed matches."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "gateway", "state", "cli", "plugins", "sim")
SOURCES = sorted(
    [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")] + [ROOT / "run_agent.py"]
)
OURS = (*PACKAGES, "run_agent")
META_OWNER = ROOT / "agent" / "session_meta.py"


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports(path: Path) -> set[str]:
    """Every module of ours that `path` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in OURS}


def layer_table(readme: str) -> dict[str, set[str]]:
    """The README's layer table: package -> the names it may import ("nothing of ours": none)."""
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = {}
    for row in re.finditer(r"^\| `([\w.]+?)(?:/|\.py)?` \|.*\| ([^|]+) \|$", section, re.M):
        package, allowed = row.group(1), row.group(2).strip()
        names = set() if allowed == "nothing of ours" else {a.strip() for a in allowed.split(",")}
        table[package] = names | {package}
    return table


LAYERS = layer_table((ROOT / "README.md").read_text(encoding="utf-8"))


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def module_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a `from pkg import sub` counts as pkg.sub)."""
    modules = {_module_name(p): p for p in SOURCES}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {t for t in _imports(path) if t in modules}
        # `from pkg import sub` adds both "pkg" and "pkg.sub": keep only the submodule.
        graph[name] = {t for t in targets if not any(u.startswith(t + ".") for u in targets)}
        graph[name].discard(name)
    return graph


def open_matches(path: Path) -> list[int]:
    """Lines of `match` statements that are not closed.

    A match over classes (a union) must end in a catch-all that calls `assert_never`, so a new
    member is a type error. A match over values must end in a catch-all too (any body: a
    default, a raise, or `assert_never` when the values are a `Literal`, which mypy's
    exhaustive-match check then holds to account).
    """
    bad: list[int] = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Match):
            continue
        last = node.cases[-1]
        irrefutable = last.guard is None and (
            isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None
        )
        calls = {
            n.func.id
            for stmt in last.body
            for n in ast.walk(stmt)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        over_classes = any(
            isinstance(p, ast.MatchClass) for c in node.cases for p in ast.walk(c.pattern)
        )
        if not irrefutable or (over_classes and "assert_never" not in calls):
            bad.append(node.lineno)
    return bad


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_every_module_says_what_it_is(path: Path) -> None:
    """Each module opens with a docstring."""
    assert ast.get_docstring(_tree(path)), _rel(path)


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_modules_stay_under_600_lines(path: Path) -> None:
    """A module is split by responsibility before it passes 600 lines."""
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 600, _rel(path)


def test_the_layer_table_names_every_package() -> None:
    """README's layer table has a row for each package and for run_agent.py."""
    assert set(LAYERS) == set(OURS)


@pytest.mark.parametrize("layer", sorted(OURS))
def test_imports_only_point_down(layer: str) -> None:
    """Every import of ours, lazy ones included, is one the README's layer table allows."""
    allowed = LAYERS[layer]
    paths = [ROOT / "run_agent.py"] if layer == "run_agent" else (ROOT / layer).rglob("*.py")
    bad = {
        f"{_rel(path)} imports {name}"
        for path in paths
        for name in _imports(path)
        if not any(name == a or name.startswith(a + ".") for a in allowed)
        # `from state.values import Usage` also lists "state.values.Usage": judged by its module
        and not any(name.startswith(a + ".") for a in _imports(path) if a in allowed)
    }
    assert not bad, sorted(bad)


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or around a loop, even lazily."""
    assert find_cycles(module_graph()) == []


def test_the_cycle_check_sees_lazy_loops() -> None:
    """The checker itself finds a loop closed by an import inside a function."""
    graph = {"a.run": {"a.actions"}, "a.actions": {"a.run"}, "b": {"a.run"}}
    assert find_cycles(graph) == [["a.actions", "a.run"]]


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_every_match_is_closed(path: Path) -> None:
    """Each `match` ends in a catch-all; over a union of classes it calls assert_never."""
    assert open_matches(path) == [], _rel(path)


def test_the_match_check_rejects_an_open_union() -> None:
    """A match over classes without assert_never, or one without a catch-all, is reported."""
    src = (
        "match step:\n    case Finish():\n        pass\n    case CallTools():\n        pass\n"
        "match step:\n    case Finish():\n        pass\n    case _:\n        raise ValueError\n"
        "match name:\n    case 'a':\n        pass\n    case other:\n        raise ValueError(other)\n"
        "match name:\n    case 'a':\n        pass\n"
    )
    path = ROOT / "tests" / "_probe_match.py"
    _tree.cache_clear()
    try:
        path.write_text(src, encoding="utf-8")
        assert open_matches(path) == [1, 6, 16]
    finally:
        path.unlink()
        _tree.cache_clear()


@pytest.mark.parametrize("path", [p for p in SOURCES if p != META_OWNER], ids=_rel)
def test_session_meta_has_one_owner(path: Path) -> None:
    """Only agent/session_meta.py reads or writes the raw meta record (the store implements it)."""
    if path.parts[len(ROOT.parts)] == "state":
        return
    calls = {
        node.func.attr
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert not calls & {"get_meta", "update_meta"}, _rel(path)


def test_importing_the_cli_loads_no_sdk() -> None:
    """`import run_agent` and building the parser pay for no provider or platform SDK."""
    code = (
        "import sys, run_agent; run_agent.build_parser(); "
        "print(sorted(m for m in ('anthropic', 'openai', 'telegram', 'discord') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.strip() == "[]"
