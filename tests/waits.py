"""How long a test waits for a condition before it fails: one bound for the whole suite.

A test never sleeps for a guess; it waits for the exact condition it asserts, and these bounds only
turn a condition that never comes into a failure instead of a hang. They are generous on purpose:
on a loaded machine the condition comes late, not never. Set `HERMES_TEST_WAIT_SCALE` (a positive
number, default 1) to stretch every bound on a slow machine, e.g. `HERMES_TEST_WAIT_SCALE=3`.
"""

from __future__ import annotations

import os

__all__ = ["SLOW_WAIT_S", "WAIT_SCALE", "WAIT_S"]


def _scale(raw: str | None) -> float:
    if not raw:
        return 1.0
    try:
        scale = float(raw)
    except ValueError:
        scale = 0.0
    if not scale > 0 or scale == float("inf"):
        raise ValueError(f"HERMES_TEST_WAIT_SCALE must be a positive number, not {raw!r}")
    return scale


WAIT_SCALE = _scale(os.environ.get("HERMES_TEST_WAIT_SCALE"))

WAIT_S = 5.0 * WAIT_SCALE
"""For a condition inside the test's own process: a task, a fake service, a socket on loopback."""

SLOW_WAIT_S = 6 * WAIT_S
"""For a condition behind a child process that must start, import Hermes and serve (a pty chat,
gateway workers, MCP servers), or several workers taking turns at a lease."""
