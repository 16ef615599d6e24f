"""Progress lines: every so many turns and at the end of a mode, with the time left estimated."""

from __future__ import annotations

import io

import pytest

from sim.progress import ProgressLine


def test_lines_come_every_n_turns_and_at_the_end_with_an_eta() -> None:
    """With 2 s per turn, 5 of 12 done after 10 s leaves 14 s; the last turn always prints, the
    start (0 done) never does."""
    now = [0.0]
    out = io.StringIO()
    progress = ProgressLine(out, every=5, clock=lambda: now[0])
    for done in range(13):
        now[0] = 2.0 * done
        progress("batch", done, 12)
    assert out.getvalue().splitlines() == [
        "replay batch: 5/12 turns, 10 s, ETA 14 s",
        "replay batch: 10/12 turns, 20 s, ETA 4 s",
        "replay batch: 12/12 turns, 24 s, ETA 0 s",
    ]


def test_each_mode_has_its_own_start() -> None:
    """A second mode's elapsed time starts at its own first turn."""
    now = [100.0]
    out = io.StringIO()
    progress = ProgressLine(out, every=1, clock=lambda: now[0])
    progress("batch", 1, 1)
    now[0] = 250.0
    progress("micro-cold", 1, 1)
    assert out.getvalue().splitlines()[-1] == "replay micro-cold: 1/1 turns, 0 s, ETA 0 s"


def test_a_zero_step_is_refused() -> None:
    """Printing every 0 turns makes no sense and says so."""
    with pytest.raises(ValueError, match="at least 1"):
        ProgressLine(io.StringIO(), every=0)
