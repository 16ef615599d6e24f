"""Progress lines for long replays: one line per so many turns, with the time left estimated.

`ProgressLine` is a `sim.replay.Progress` callback; the replay script writes it to stderr and
`hermes demo` to its own output. Nothing prints unless a caller passes one, so tests stay quiet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["ProgressLine"]


class ProgressLine:
    """Writes `replay MODE: DONE/TOTAL turns, ELAPSED s, ETA S s` every `every` turns and at
    the end of each mode; a mode's clock starts at its first report (0 turns done: no line)."""

    def __init__(
        self,
        stream: TextIO,
        *,
        every: int = 25,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if every < 1:
            raise ValueError("every must be at least 1")
        self._stream = stream
        self._every = every
        self._clock = clock
        self._started: dict[str, float] = {}

    def __call__(self, mode: str, done: int, total: int) -> None:
        now = self._clock()
        started = self._started.setdefault(mode, now)
        if done == 0 or (done % self._every and done != total):
            return
        elapsed = now - started
        eta = elapsed / done * (total - done) if done else 0.0
        print(
            f"replay {mode}: {done}/{total} turns, {elapsed:.0f} s, ETA {eta:.0f} s",
            file=self._stream,
            flush=True,
        )
