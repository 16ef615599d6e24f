"""`hermes logs [-f] [-n N] [--level L] [--json]`: agent.log as lines a person reads.

agent.log holds one JSON object per line (`agent.logging_setup`); this prints the last lines as
`time level logger event key=value …`, or the raw JSON with `--json`. `-f` keeps printing what is
appended, and follows the file across a rotation (agent.log renamed to agent.log.1 and a new one
started) or a truncation. Reading is plain file I/O: no runtime, no config needed, so it works
when the config is broken.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "add_logs_parser",
    "follow",
    "format_line",
    "last_lines",
    "run_logs_command",
]

DEFAULT_LINES = 50
POLL_S = 0.25
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_HEAD_KEYS = ("timestamp", "level", "logger", "event")
_BLOCK = 64 * 1024


def add_logs_parser(sub: Any) -> None:
    """Add `logs` to the `hermes` sub-parsers."""
    logs = sub.add_parser("logs", help="show agent.log (-f to follow it)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument(
        "-n",
        "--lines",
        type=int,
        default=DEFAULT_LINES,
        help=f"how many of the last lines (default: {DEFAULT_LINES})",
    )
    logs.add_argument("--level", choices=list(_LEVELS), help="only this level and above")
    logs.add_argument("--json", action="store_true", help="print the JSON lines as stored")


def run_logs_command(args: argparse.Namespace, home: Path, *, out: TextIO | None = None) -> int:
    """Print the last lines of HERMES_HOME/logs/agent.log; with -f, follow until Ctrl-C."""
    from agent.logging_setup import LOG_FILE_NAME

    stream = out or sys.stdout
    path = home / "logs" / LOG_FILE_NAME
    if not path.exists() and not args.follow:
        print(f"hermes: no log yet at {path}", file=sys.stderr)
        return 1
    keep = _filter(args.level, raw=args.json)
    for line in last_lines(path, max(0, args.lines)) if path.exists() else []:
        _emit(keep(line), stream)
    if not args.follow:
        return 0
    try:
        follow(path, lambda line: _emit(keep(line), stream))
    except KeyboardInterrupt:
        pass
    return 0


def format_line(line: str) -> str:
    """One agent.log line for a person: `time level logger event key=value …` (a line that is
    not a JSON object is shown as it is)."""
    record = _record(line)
    if record is None:
        return line.rstrip("\n")
    stamp = str(record.get("timestamp", ""))[:19].replace("T", " ")
    head = f"{stamp} {str(record.get('level', '')):<7} {record.get('logger', '')}"
    rest = " ".join(f"{k}={_shown(v)}" for k, v in record.items() if k not in _HEAD_KEYS)
    return f"{head} {record.get('event', '')}" + (f" {rest}" if rest else "")


def last_lines(path: Path, count: int) -> list[str]:
    """The last `count` lines of `path`, read from its end (a big log is not read whole)."""
    if count == 0:
        return []
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell()
        data = b""
        while end > 0 and data.count(b"\n") <= count:
            start = max(0, end - _BLOCK)
            handle.seek(start)
            data = handle.read(end - start) + data
            end = start
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-count:]


def follow(
    path: Path,
    emit: Callable[[str], None],
    *,
    poll_s: float = POLL_S,
    should_stop: Callable[[], bool] = lambda: False,
    start_at: int | None = None,
) -> None:
    """Hand every line appended to `path` to `emit`, from its end (or byte `start_at`) on,
    until `should_stop()`; a rotated or truncated file is reopened from its start."""
    handle, identity = _open_at(path, start_at)
    try:
        while not should_stop():
            if handle is not None:
                for line in _complete_lines(handle):
                    emit(line)
            current = _identity(path)
            if current is not None and (current != identity or _was_truncated(handle, path)):
                if handle is not None:
                    for line in _complete_lines(handle, final=True):  # the rotated file's tail
                        emit(line)
                    handle.close()
                handle, identity = path.open(encoding="utf-8", errors="replace"), current
                continue
            time.sleep(poll_s)
    finally:
        if handle is not None:
            handle.close()


def _open_at(path: Path, offset: int | None) -> tuple[TextIO | None, tuple[int, int] | None]:
    if not path.exists():
        return None, None
    handle = path.open(encoding="utf-8", errors="replace")
    if offset is None:
        handle.seek(0, os.SEEK_END)
    else:
        handle.seek(offset)
    return handle, _identity(path)


def _complete_lines(handle: TextIO, *, final: bool = False) -> Iterable[str]:
    """Whole lines that arrived since the last call (a half-written line waits for its end)."""
    while True:
        position = handle.tell()
        line = handle.readline()
        if not line:
            return
        if not line.endswith("\n") and not final:
            handle.seek(position)
            return
        yield line.rstrip("\n")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def _was_truncated(handle: TextIO | None, path: Path) -> bool:
    if handle is None:
        return False
    try:
        return path.stat().st_size < handle.tell()
    except FileNotFoundError:
        return False


def _filter(level: str | None, *, raw: bool) -> Callable[[str], str | None]:
    floor = _LEVELS.get(level or "debug", 0)

    def keep(line: str) -> str | None:
        if not line.strip():
            return None
        record = _record(line)
        if level and record is not None:
            if _LEVELS.get(str(record.get("level", "")).lower(), 0) < floor:
                return None
        return line if raw else format_line(line)

    return keep


def _emit(line: str | None, stream: TextIO) -> None:
    if line is not None:
        stream.write(line + "\n")
        stream.flush()


def _record(line: str) -> dict[str, Any] | None:
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False) if (" " in text or not text) else text
