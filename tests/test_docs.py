"""The documentation cannot go stale silently: README.md is a front door that reaches every page
of docs/ in one link, every relative link resolves, every repository path a page names exists,
and every `file.py` `name` pair in docs/architecture.md names a definition in that file.

Contracts: CommonMark 0.31 for inline links (`[text](target)`, `![alt](target)`), link reference
definitions (`[label]: target`) and fenced code blocks (whose text is not markdown); GitHub Docs,
"Basic writing and formatting syntax", "Section links", for heading anchors: letters lowercased,
spaces turned into hyphens, other punctuation dropped, a repeated heading suffixed -1, -2, …
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250
REPO_DIRS = ("agent", "gateway", "state", "cli", "plugins", "sim", "scripts", "tests", "deploy")
"""A backticked path under one of these is a file of this repository, and must exist."""

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_PAIR = re.compile(r"`([\w./-]+\.py)`\s+`([A-Za-z_][\w.]*)`")
_PY_PATH = re.compile(r"`([\w./-]+\.py)`")
_REPO_PATH = re.compile(r"`((?:" + "|".join(REPO_DIRS) + r")/[\w./-]*)`")


def prose_lines(text: str) -> list[str]:
    """The lines of a page outside fenced code blocks."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            lines.append(line)
    return lines


def links(text: str) -> list[str]:
    """Every link target of a page, inline or by reference, outside code and HTML comments."""
    prose = _COMMENT.sub("", "\n".join(prose_lines(text)))
    found: list[str] = []
    for line in prose.splitlines():
        if (ref := _REFERENCE.match(line)) is not None:
            found.append(ref.group(1))
            continue
        found += [m.group(1) for m in _LINK.finditer(_INLINE_CODE.sub("", line))]
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (before the -1, -2 suffix of a repeat)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings."""
    seen: Counter[str] = Counter()
    found: set[str] = set()
    for line in prose_lines(text):
        if (heading := _HEADING.match(line)) is None:
            continue
        base = slug(heading.group(2))
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file (or heading anchor) does not exist."""
    bad: list[str] = []
    for target in links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto: — not ours to check offline
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            bad.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md":
            if anchor not in anchors(resolved.read_text(encoding="utf-8")):
                bad.append(f"{target}: no heading with that anchor in {resolved.name}")
    return bad


def defines(path: Path, dotted: str) -> bool:
    """Whether `path` defines `dotted`: a function, class, or module-level name, or a method
    or attribute of a class (`GatewayRunner._handle`)."""
    scope: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    for part in dotted.split("."):
        match = next((node for node in scope if part in _names(node)), None)
        if match is None:
            return False
        scope = match.body if isinstance(match, ast.ClassDef) else []
    return True


def _names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def stale_references(text: str, root: Path) -> list[str]:
    """The `file.py` paths and `file.py` `name` pairs of a page that `root` no longer has."""
    prose = "\n".join(prose_lines(text))
    bad = [f"{p}: no such file" for p in _PY_PATH.findall(prose) if not (root / p).is_file()]
    for path, name in _PAIR.findall(prose):
        if (root / path).is_file() and not defines(root / path, name):
            bad.append(f"{path}: defines no {name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    """Each link to a file of the repository finds it, and a link to a heading finds that."""
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_named_exists(page: Path) -> None:
    """A backticked path under a package (`gateway/run.py`, `tests/fakes/`) is still there."""
    text = "\n".join(prose_lines(page.read_text(encoding="utf-8")))
    missing = sorted({p for p in _REPO_PATH.findall(text) if not (ROOT / p).exists()})
    assert missing == []


def test_the_architecture_map_names_what_exists() -> None:
    """Every `file.py` and `file.py` `function` of docs/architecture.md is in the tree, and the
    map is a map: it names many definitions (the parser did not silently find none)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert stale_references(text, ROOT) == []
    pairs = _PAIR.findall("\n".join(prose_lines(text)))
    assert len(pairs) >= 40, pairs
    assert {"cli/runtime.py", "gateway/run.py", "agent/agent.py"} <= {p for p, _ in pairs}


def test_the_readme_is_a_front_door() -> None:
    """README stays short and reaches every page of docs/ in one link."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(text) if t.startswith("docs/")}
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set()


def test_the_checks_find_what_they_forbid(tmp_path: Path) -> None:
    """Each checker reports its probe: a link to a missing file or heading (but not one inside
    code, nor a web address), a missing file, and a name its file does not define."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "LIMIT = 1\nclass Runner:\n    async def handle(self):\n        pass\ndef run():\n    pass\n"
    )
    page = tmp_path / "page.md"
    page.write_text(
        "# Where `x` is: a map\n\n## Where `x` is: a map\n\n"
        "[ok](#where-x-is-a-map-1) [gone](missing.md) [bad](page.md#nowhere) "
        "[web](https://example.com/x.md) `[code](nowhere.md)`\n\n"
        "```\n[fenced](nowhere.md)\n```\n\n<!-- a [comment](nowhere.md)\n-->\n[ref]: other.md\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "page.md#nowhere: no heading with that anchor in page.md",
        "other.md: no such file",
    ]
    text = (
        "`pkg/mod.py` `Runner.handle`, `pkg/mod.py` `run`, `pkg/mod.py` `LIMIT`,\n"
        "`pkg/mod.py` `Runner.stop`, `pkg/mod.py` `handle`, `pkg/gone.py` `run`"
    )
    assert stale_references(text, tmp_path) == [
        "pkg/gone.py: no such file",
        "pkg/mod.py: defines no Runner.stop",
        "pkg/mod.py: defines no handle",
    ]
