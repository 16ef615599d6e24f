"""House rules that a review can miss: docstrings, module size, layering, cycles, closed matches,
one name per module, composition over stubbed mixins, and no swallowed cancellation.

The rules these tests hold (issue 30), for the packages and `run_agent.py` (not tests/ or scripts/):

- **One name per module.** No two modules share a file name, except `__init__.py` and
  `__main__.py`, and except inside a *family* package (`FAMILIES`), whose modules are members of
  one kind or the kind's own parts (`base`, `registry`): their path reads as kind/name, so
  `platforms/terminal.py` (the terminal front end) and `tools/terminal.py` (the shell tool) are
  named by their package. tests/ is left out on purpose: a test module is named for the module
  it tests (`tests/agent/compaction/test_boundary.py`), and a fake for what it fakes.
- **Compose, do not mix in.** A method whose whole body is `raise NotImplementedError` is a hook
  for a subclass to fill; a class that inherits one fails. A hook belongs in a `Protocol` (the
  host is held and typed by it: `SessionView`, `LedgerHost`) or, for a template method, is an
  `abc.abstractmethod` of an ABC (`state.locks.NamedLocks`): both are checked by mypy, not at
  run time.
- **No implementation mixins.** A class inherits from at most one non-Protocol class of ours;
  what it is made of, it holds (`SqlSessionStore` holds one object per store role).
- **Never swallow a cancellation.** No `contextlib.suppress(CancelledError)`: it cannot tell "the
  task I cancelled finished" from "I was cancelled". To stop a task and wait for it, cancel it
  and `await asyncio.wait({task})`, which raises only for the caller's own cancellation.
"""

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
FAMILIES = ("gateway/platforms", "agent/providers", "agent/tools", "plugins")
"""Packages of one kind of thing (platforms, providers, tools, plugins): a member's file name
is qualified by its package, so it may repeat a name used elsewhere."""
SHARED_FILE_NAMES = frozenset({"__init__.py", "__main__.py"})
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


def layer_table(architecture: str) -> dict[str, set[str]]:
    """The layer table of docs/architecture.md: package -> the names it may import ("nothing of
    ours": none)."""
    section = architecture.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = {}
    for row in re.finditer(r"^\| `([\w.]+?)(?:/|\.py)?` \|.*\| ([^|]+) \|$", section, re.M):
        package, allowed = row.group(1), row.group(2).strip()
        names = set() if allowed == "nothing of ours" else {a.strip() for a in allowed.split(",")}
        table[package] = names | {package}
    return table


LAYERS = layer_table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))


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
    """The layer table (docs/architecture.md) has a row for each package and for run_agent.py."""
    assert set(LAYERS) == set(OURS)


@pytest.mark.parametrize("layer", sorted(OURS))
def test_imports_only_point_down(layer: str) -> None:
    """Every import of ours, lazy ones included, is one the layer table allows."""
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


def same_name_modules(paths: Iterable[Path]) -> dict[str, list[str]]:
    """File name -> the modules outside the family packages that share it (two or more)."""
    by_name: dict[str, list[str]] = {}
    for path in paths:
        rel = _rel(path)
        if path.name in SHARED_FILE_NAMES or any(rel.startswith(f + "/") for f in FAMILIES):
            continue
        by_name.setdefault(path.name, []).append(rel)
    return {name: sorted(rels) for name, rels in by_name.items() if len(rels) > 1}


def _base_name(node: ast.expr) -> str:
    """`Protocol`, `typing.Protocol`, `Protocol[T]`, `Generic[T]` -> the class's own name."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_stub(node: ast.stmt) -> bool:
    """A method that only raises NotImplementedError, and is no `abstractmethod`."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    if any(_base_name(d) == "abstractmethod" for d in node.decorator_list):
        return False
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    return _base_name(exc.func if isinstance(exc, ast.Call) else exc) == "NotImplementedError"


def stub_inheritors(paths: Iterable[Path]) -> list[str]:
    """Classes that inherit a class (not a Protocol) with `raise NotImplementedError` stubs."""
    classes = [
        (path, node)
        for path in paths
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ClassDef)
    ]
    stubbed = {
        node.name: _rel(path)
        for path, node in classes
        if "Protocol" not in {_base_name(b) for b in node.bases}
        and any(_is_stub(stmt) for stmt in node.body)
    }
    return sorted(
        f"{_rel(path)}: {node.name} inherits the stubs of {base} ({stubbed[base]})"
        for path, node in classes
        for base in {_base_name(b) for b in node.bases} & set(stubbed)
    )


def mixed_classes(paths: Iterable[Path]) -> list[str]:
    """Classes that inherit from two or more classes of ours that are not Protocols: implementation
    mixins, whichever of them defines a method. (A Protocol base is a type, not an implementation.)"""
    classes = [
        node for path in paths for node in ast.walk(_tree(path)) if isinstance(node, ast.ClassDef)
    ]
    implementations = {
        node.name for node in classes if "Protocol" not in {_base_name(b) for b in node.bases}
    }
    found = []
    for path in paths:
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.ClassDef):
                continue
            mixed = sorted({_base_name(b) for b in node.bases} & implementations)
            if len(mixed) >= 2:
                found.append(f"{_rel(path)}: {node.name} mixes {', '.join(mixed)}")
    return sorted(found)


def cancel_suppressions(path: Path) -> list[int]:
    """Lines of `suppress(...)` calls that name CancelledError (alone or among others)."""
    return sorted(
        node.lineno
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call)
        and _base_name(node.func) == "suppress"
        and any(
            isinstance(n, ast.Name | ast.Attribute) and _base_name(n) == "CancelledError"
            for arg in node.args
            for n in ast.walk(arg)
        )
    )


def test_no_two_modules_share_a_file_name() -> None:
    """Each module's file name says which one it is: `gateway/principals.py`, not a second
    `access.py` (family packages and `__init__`/`__main__` aside; see the module docstring)."""
    assert same_name_modules(SOURCES) == {}


def test_no_class_inherits_not_implemented_stubs() -> None:
    """Composition, not mixins that stub their host's hooks (Protocols and ABCs aside)."""
    assert stub_inheritors(SOURCES) == []


def test_no_class_mixes_implementations() -> None:
    """A class holds the parts it is made of (`SqlSessionStore.transcript`, `AIAgent`'s ledger
    keeper) instead of inheriting two implementations of ours: a reader then finds a method
    by its holder, not by walking the bases in order."""
    assert mixed_classes(SOURCES) == []


def test_the_mixin_check_finds_two_implementation_bases() -> None:
    """Two bases of ours are refused; one base, or Protocols beside it, or a class of
    someone else's (here `Exception`), are not."""
    source = (
        "class Routes:\n    def route(self) -> None: ...\n"
        "class Archive:\n    async def archive(self) -> None: ...\n"
        "class Store(Routes, Archive):\n    pass\n"
        "class Reader(Protocol):\n    def read(self) -> None: ...\n"
        "class Writer(Reader, Protocol):\n    def write(self) -> None: ...\n"
        "class Single(Routes):\n    pass\n"
        "class Typed(Routes, Reader, Writer):\n    pass\n"
        "class Failure(Routes, Exception):\n    pass\n"
    )
    probe = ROOT / "tests" / "_probe_mixins.py"
    _tree.cache_clear()
    try:
        probe.write_text(source, encoding="utf-8")
        assert mixed_classes([probe]) == ["tests/_probe_mixins.py: Store mixes Archive, Routes"]
    finally:
        probe.unlink()
        _tree.cache_clear()


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_no_cancellation_is_suppressed(path: Path) -> None:
    """No `suppress(CancelledError)`: it swallows the caller's own cancellation too."""
    assert cancel_suppressions(path) == [], _rel(path)


def test_the_new_checks_find_what_they_forbid() -> None:
    """Each checker reports its probe: a mixin stubbing its host (but neither a Protocol nor
    an ABC), a second module of one name (but not in a family package), and a suppressed
    cancellation in any spelling."""
    stubs = (
        "class Hooks:\n    def _reload(self) -> None:\n        raise NotImplementedError\n"
        "class Agent(Hooks):\n    pass\n"
        "class View(Protocol):\n    def now(self) -> float:\n        raise NotImplementedError\n"
        "class Reader(View):\n    pass\n"
        "class Backend(ABC):\n    @abstractmethod\n    def acquire(self) -> None:\n"
        "        raise NotImplementedError()\n"
        "class Sqlite(Backend):\n    pass\n"
    )
    suppressions = (
        "with contextlib.suppress(asyncio.CancelledError):\n    pass\n"
        "with suppress(ValueError, CancelledError):\n    pass\n"
        "with suppress(ValueError):\n    pass\n"
    )
    probe = ROOT / "tests" / "_probe_conventions.py"
    _tree.cache_clear()
    try:
        probe.write_text(stubs, encoding="utf-8")
        assert stub_inheritors([probe]) == [
            "tests/_probe_conventions.py: Agent inherits the stubs of Hooks "
            "(tests/_probe_conventions.py)"
        ]
        probe.write_text(suppressions, encoding="utf-8")
        _tree.cache_clear()
        assert cancel_suppressions(probe) == [1, 3]
    finally:
        probe.unlink()
        _tree.cache_clear()
    named = [
        ROOT / "gateway" / "access.py",
        ROOT / "agent" / "access.py",
        ROOT / "gateway" / "platforms" / "terminal.py",
        ROOT / "agent" / "tools" / "terminal.py",
        ROOT / "agent" / "__init__.py",
        ROOT / "state" / "__init__.py",
    ]
    assert same_name_modules(named) == {"access.py": ["agent/access.py", "gateway/access.py"]}


TEST_MODULES = sorted(p for p in (ROOT / "tests").rglob("*.py") if p.name != "waits.py")


def own_wait_bounds(tree: ast.Module) -> list[int]:
    """Lines where a module binds its own `WAIT_S` at top level (the bound is `tests.waits`')."""
    return sorted(
        node.lineno
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for n in ast.walk(target)
        if isinstance(n, ast.Name) and n.id == "WAIT_S"
    )


def test_no_test_module_defines_its_own_wait_bound() -> None:
    """Every test waits within `tests.waits.WAIT_S` (scaled by HERMES_TEST_WAIT_SCALE), so a slow
    machine stretches every bound at once; a module-local `WAIT_S = 5.0` would not follow."""
    found = {_rel(p): lines for p in TEST_MODULES if (lines := own_wait_bounds(_tree(p)))}
    assert found == {}


def test_the_wait_bound_check_finds_a_local_bound() -> None:
    """Plain, annotated and tuple bindings count; importing the shared bound does not."""
    probe = ast.parse(
        "from tests.waits import WAIT_S\n"
        "WAIT_S = 5.0\n"
        "WAIT_S: float = 10.0\n"
        "KEY, WAIT_S = 'k', 1.0\n"
        "def f() -> None:\n    WAIT_S = 1.0\n"
    )
    assert own_wait_bounds(probe) == [2, 3, 4]
