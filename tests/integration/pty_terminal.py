"""Run the real `hermes` in a pseudo-terminal and read its screen as a terminal would show it.

pexpect owns the pty (keys in, bytes out); pyte is the terminal emulator the bytes are fed to,
so tests wait for what a person would see (prompt_toolkit redraws lines in place with cursor
moves, which a raw byte stream does not show). `wait_for` reads until a condition on the screen
holds, or fails with the screen after a timeout: never a sleep.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pyte

from tests.waits import SLOW_WAIT_S

__all__ = ["ALT_ENTER", "CTRL_C", "CTRL_D", "ESC", "HermesTerminal"]

CTRL_C, CTRL_D, ESC = "\x03", "\x04", "\x1b"
ALT_ENTER = "\x1b\r"
"""What a terminal sends for Alt-Enter (Meta sends Escape first)."""
ROWS, COLS = 50, 140


class _Screen(pyte.HistoryScreen):
    """pyte's screen, whose replies to the program (a cursor-position report) can be sent."""

    answer: Callable[[str], object] | None = None

    def write_process_input(self, data: str) -> None:
        if self.answer is not None:
            self.answer(data)


class HermesTerminal:
    """`hermes ARGS` in a pty of ROWS x COLS, HERMES_HOME set; use as a context manager."""

    def __init__(
        self, home: Path, *args: str, cwd: Path | None = None, answer_cpr: bool = False
    ) -> None:
        """`answer_cpr`: answer prompt_toolkit's cursor-position requests (as a terminal does),
        so it knows the screen's height and draws the bottom toolbar; off, it is told not to
        ask (`PROMPT_TOOLKIT_NO_CPR`) and draws no toolbar."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", str(home)),
            "HERMES_HOME": str(home),
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
        }
        if not answer_cpr:
            env["PROMPT_TOOLKIT_NO_CPR"] = "1"
        if os.environ.get("PYTHONPATH"):  # the code under test, not whatever is installed
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "run_agent", *args],
            cwd=str(cwd or home),
            env=env,
            dimensions=(ROWS, COLS),
            encoding="utf-8",
            codec_errors="replace",
        )
        self.screen = _Screen(COLS, ROWS, history=2000)
        if answer_cpr:
            self.screen.answer = self.child.send
        self._stream = pyte.Stream(self.screen)
        self.transcript = ""
        """Everything the program wrote, escapes included (for failure messages)."""

    def __enter__(self) -> HermesTerminal:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)

    # ---- keys in --------------------------------------------------------------------------

    def type(self, text: str) -> None:
        """Type `text` as keys (no Enter)."""
        self.child.send(text)

    def enter(self, text: str = "") -> None:
        """Type `text`, then Enter."""
        self.child.send(text + "\r")

    # ---- screen out -----------------------------------------------------------------------

    def resize(self, rows: int, cols: int) -> None:
        """The window is resized: the program gets SIGWINCH, the emulator the new size."""
        self.screen.resize(rows, cols)
        self.child.setwinsize(rows, cols)

    def history(self) -> list[str]:
        """The rows that scrolled off the top of the screen, oldest first, right-trimmed."""
        return [
            "".join(line[c].data for c in range(max(line, default=-1) + 1)).rstrip()
            for line in self.screen.history.top
        ]

    def display(self) -> list[str]:
        """The rows on screen now, top to bottom, right-trimmed."""
        return [row.rstrip() for row in self.screen.display]

    def text(self) -> str:
        """Everything on screen and scrolled off it, one line per row, right-trimmed."""
        return "\n".join([*self.history(), *self.display()])

    def wait_for(
        self, condition: Callable[[str], bool] | str, *, timeout_s: float = SLOW_WAIT_S
    ) -> str:
        """Read output until `condition(screen text)` holds (a string: it is on screen)."""
        check = (lambda t: condition in t) if isinstance(condition, str) else condition
        deadline = time.monotonic() + timeout_s
        while not check(self.text()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {condition!r}; screen:\n{self.text()}")
            self._read(left)
        return self.text()

    def count(self, needle: str) -> int:
        return self.text().count(needle)

    def wait_exit(self, *, timeout_s: float = SLOW_WAIT_S) -> int:
        """Read until the program ends; its exit status."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"hermes did not exit; screen:\n{self.text()}")
            try:
                self._feed(self.child.read_nonblocking(65536, timeout=min(left, 1.0)))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                break
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, f"hermes died by signal {self.child.signalstatus}"
        return int(status)

    def _read(self, timeout_s: float) -> None:
        try:
            self._feed(self.child.read_nonblocking(65536, timeout=timeout_s))
        except pexpect.TIMEOUT:
            return
        except pexpect.EOF:
            raise AssertionError(f"hermes exited early; screen:\n{self.text()}") from None

    def _feed(self, chunk: str) -> None:
        self.transcript += chunk
        self._stream.feed(chunk)
