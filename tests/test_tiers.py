"""The slow tier names tests that exist: a renamed module or test would otherwise fall out of
the tier silently and slow the default run (or, worse, the name would mark nothing)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SLOW_MODULES, SLOW_TESTS

ROOT = Path(__file__).resolve().parents[1]


def test_every_slow_module_exists() -> None:
    missing = sorted(m for m in SLOW_MODULES if not (ROOT / m).is_file())
    assert missing == []


def test_every_slow_test_is_defined_in_its_module() -> None:
    missing = []
    for test_id in sorted(SLOW_TESTS):
        module, _, name = test_id.partition("::")
        path = ROOT / module
        source = path.read_text(encoding="utf-8") if path.is_file() else ""
        if not re.search(rf"^(async )?def {re.escape(name)}\(", source, re.MULTILINE):
            missing.append(test_id)
    assert missing == []
