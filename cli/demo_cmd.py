"""`hermes demo`'s arguments, apart from the replay itself (`sim.demo`).

Building the `hermes` parser imports this module only; the simulator (its aiohttp model server,
the replay) loads when `hermes demo` runs, so every other command starts without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DEMO_LATENCY", "DEMO_TURNS", "DEMO_WINDOW", "add_demo_parser"]

DEMO_TURNS = 70
DEMO_WINDOW = 64_000
"""Small enough that batch compaction fires several times within the demo's turns."""
DEMO_LATENCY = "local"


def add_demo_parser(sub: Any) -> None:
    """Add `demo` to the `hermes` sub-parsers."""
    demo = sub.add_parser(
        "demo", help="replay a simulated coding session offline and show what compaction does"
    )
    demo.add_argument(
        "--turns", type=int, default=DEMO_TURNS, help=f"turns to replay (default: {DEMO_TURNS})"
    )
    demo.add_argument(
        "--context-window",
        type=int,
        default=DEMO_WINDOW,
        help=f"the simulated model's window in tokens (default: {DEMO_WINDOW})",
    )
    demo.add_argument(
        "--seed", type=int, default=7, help="seed of the simulated conversation (default: 7)"
    )
    demo.add_argument(
        "--mode",
        choices=["batch", "micro-always", "micro-cold", "all"],
        default="all",
        help="which compaction strategy to run (default: all, side by side)",
    )
    demo.add_argument(
        "--latency-model",
        default=DEMO_LATENCY,
        help="how fast the simulated model is: none, local (default), hosted, hosted-small",
    )
    demo.add_argument("--out", type=Path, default=None, help="where the plot and JSON go")
