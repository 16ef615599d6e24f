"""Output to a terminal or a pipe: when the reader goes away (`hermes logs | head`), the command
ends quietly with the shell's code for SIGPIPE instead of a BrokenPipeError traceback.

Python's own advice (https://docs.python.org/3/library/signal.html#note-on-sigpipe): catch the
error, then point stdout at /dev/null so the interpreter's final flush cannot fail again.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

__all__ = ["BROKEN_PIPE_EXIT", "quiet_on_broken_pipe"]

BROKEN_PIPE_EXIT = 128 + 13
"""What a shell reports for a process ended by SIGPIPE."""


def quiet_on_broken_pipe(main: Callable[[], int]) -> int:
    """Run `main`; a closed stdout ends it with `BROKEN_PIPE_EXIT` and nothing on stderr."""
    try:
        code = main()
        sys.stdout.flush()  # a broken pipe surfaces here, not in the interpreter's exit
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_EXIT
    return code
