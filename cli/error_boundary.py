"""The command line's one error boundary: every failure a command does not handle itself ends
as one sentence on stderr and an exit code, never a traceback.

Exit codes follow the BSD sysexits convention where one fits: 2 for a usage or config mistake,
1 for a failure of the runtime or the outside world, 130 for Ctrl-C (128 + SIGINT), and 70
(EX_SOFTWARE) for a bug, whose traceback goes to agent.log (or stderr with HERMES_DEBUG=1).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Callable

import structlog

from agent.errors import ConfigError, HermesError

__all__ = ["EXIT_BUG", "EXIT_INTERRUPTED", "UsageError", "describe_failure", "run_guarded"]

EXIT_INTERRUPTED = 128 + 2
EXIT_BUG = 70

log = structlog.get_logger(__name__)


class UsageError(HermesError):
    """The command asked for what is not there or cannot be (an unknown session id, an
    empty message): exit 2, as argparse does for a usage mistake."""


_OS_FIXES = {
    errno.EACCES: "check that this user may write there (HERMES_HOME chooses the folder)",
    errno.EPERM: "check that this user may write there (HERMES_HOME chooses the folder)",
    errno.EROFS: "the file system is read-only; point HERMES_HOME at a writable folder",
    errno.ENOSPC: "the disk is full; free some space and try again",
    errno.EDQUOT: "the disk quota is used up; free some space and try again",
    errno.ENOENT: "the path does not exist; check HERMES_HOME and the paths in config.yaml",
    errno.ENOTDIR: "a file stands where a folder should be; check HERMES_HOME",
    errno.EISDIR: "a folder stands where a file should be; check the paths in config.yaml",
    errno.EADDRINUSE: "another program listens on that port; choose another in config.yaml",
}


def describe_failure(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one sentence for a failure that reached the boundary."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "interrupted"
    if isinstance(exc, ConfigError | UsageError):
        return 2, str(exc)
    if isinstance(exc, HermesError):
        return 1, str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc) or type(exc).__name__
        if exc.filename:
            what = f"{what}: {exc.filename}"
        fix = _OS_FIXES.get(exc.errno or 0)
        return 1, f"{what} ({fix})" if fix else what
    if isinstance(exc, UnicodeError):
        return 1, f"text that cannot be read or written as UTF-8 ({exc})"
    return EXIT_BUG, (
        f"internal error: {type(exc).__name__}: {str(exc)[:200]} (this is a bug: the details "
        "are in agent.log; run with HERMES_DEBUG=1 to see them here)"
    )


def run_guarded(main: Callable[[], int]) -> int:
    """Run a command; whatever escapes it is one sentence on stderr and its exit code."""
    try:
        return main()
    except SystemExit:
        raise
    except BaseException as exc:  # the one place nothing escapes from
        code, sentence = describe_failure(exc)
        if code == EXIT_BUG:
            log.error("command_crashed", exc_info=exc)
            if os.environ.get("HERMES_DEBUG"):
                traceback.print_exception(exc, file=sys.stderr)
        if code == EXIT_INTERRUPTED:
            print(file=sys.stderr)
        else:
            print(f"hermes: {sentence}", file=sys.stderr)
        return code
