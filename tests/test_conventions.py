"""House rules that a review can miss: docstrings, module size, layering, lazy SDK imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "gateway", "state", "cli", "plugins", "sim")
SOURCES = sorted(
    [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")] + [ROOT / "run_agent.py"]
)

# What each layer may import of ours (DESIGN.md "Layers"). The store sits at the bottom and owns
# the value types every layer shares (canonical messages, Usage, the root of the error tree);
# that leaf is the agent's whole view of the state package.
ALLOWED = {
    "agent": {"agent", "state.values", "state.errors", "state.contract"},
    "state": {"state"},
    "gateway": {"gateway", "agent", "state"},
    "plugins": {"plugins", "agent.plugin_api"},
}
OURS = ("agent", "gateway", "state", "cli", "plugins", "sim", "run_agent")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] in OURS}


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_every_module_says_what_it_is(path: Path) -> None:
    """Each module opens with a docstring."""
    assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), _rel(path)


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_modules_stay_under_600_lines(path: Path) -> None:
    """A module is split by responsibility before it passes 600 lines."""
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 600, _rel(path)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_only_point_down(layer: str) -> None:
    """agent never imports gateway/state/cli; state and gateway never import what sits above."""
    allowed = ALLOWED[layer]
    bad = {
        f"{_rel(path)} imports {name}"
        for path in (ROOT / layer).rglob("*.py")
        for name in _imports(path)
        if not any(name == a or name.startswith(a + ".") for a in allowed)
    }
    assert not bad, sorted(bad)


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
