"""The `read_file` and `write_file` tools: numbered, bounded reads and parent-creating writes.

Relative paths resolve against the turn's working directory (`ToolContext.cwd`). Disk work runs
in a worker thread so a large file never blocks the event loop. Writing over system files or raw
devices goes through the same approval policy as dangerous terminal commands.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from agent.errors import ToolError
from agent.providers.base import ToolSpec
from agent.tools.danger import approval_action, classify_write_path
from agent.tools.registry import Tool, ToolContext

__all__ = ["ReadWindow", "read_file_tool", "render_lines", "resolve_path", "write_file_tool"]

log = structlog.get_logger(__name__)

DEFAULT_LIMIT_LINES = 2000
MAX_LINE_CHARS = 2000
_SNIFF_BYTES = 8192

_READ_SPEC = ToolSpec(
    name="read_file",
    description="Read a text file with numbered lines.",
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "offset_line": {"type": "integer", "description": "First line, 1-based."},
            "limit_lines": {"type": "integer"},
        },
        "required": ["path"],
    },
)
_WRITE_SPEC = ToolSpec(
    name="write_file",
    description="Write text to a file, creating parent directories.",
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "append": {"type": "boolean"},
        },
        "required": ["path", "content"],
    },
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadWindow:
    """The lines of a file a read returned, and where they sit in the whole file."""

    lines: tuple[str, ...]
    first_line: int
    """1-based number of `lines[0]`."""
    total_lines: int


def read_file_tool() -> Tool:
    """The `read_file` tool for a `ToolRegistry`."""
    return Tool(spec=_READ_SPEC, handler=_handle_read)


def write_file_tool() -> Tool:
    """The `write_file` tool for a `ToolRegistry`."""
    return Tool(spec=_WRITE_SPEC, handler=_handle_write)


def resolve_path(cwd: Path, raw: str) -> Path:
    """`raw` as an absolute path: `~` expanded, relative paths taken from `cwd`."""
    return (cwd / Path(raw).expanduser()).resolve()


def render_lines(window: ReadWindow, *, max_chars: int) -> str:
    """Number the lines like `cat -n`, stop at `max_chars`, and say how to read on."""
    out: list[str] = []
    used = 0
    shown = 0
    for offset, line in enumerate(window.lines):
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}... [{len(line) - MAX_LINE_CHARS} chars cut]"
        numbered = f"{window.first_line + offset:>6}\t{line}"
        if out and used + len(numbered) + 1 > max_chars:
            break
        out.append(numbered)
        used += len(numbered) + 1
        shown += 1
    if window.total_lines == 0:
        return "(empty file)"
    if shown == 0:
        return (
            f"(the file has {window.total_lines} lines; line {window.first_line} is past the end)"
        )
    last = window.first_line + shown - 1
    if last < window.total_lines:
        out.append(
            f"[showing lines {window.first_line}-{last} of {window.total_lines}; "
            f"use offset_line={last + 1} to read on]"
        )
    return "\n".join(out)


async def _handle_read(args: dict[str, Any], ctx: ToolContext) -> str:
    path = resolve_path(ctx.cwd, _str_arg(args, "path"))
    offset = _int_arg(args, "offset_line", default=1)
    limit = _int_arg(args, "limit_lines", default=DEFAULT_LIMIT_LINES)
    window = await asyncio.to_thread(_read_window, path, offset, limit)
    log.debug("file_read", lines=len(window.lines), total_lines=window.total_lines)
    return render_lines(window, max_chars=ctx.max_output_chars)


async def _handle_write(args: dict[str, Any], ctx: ToolContext) -> str:
    path = resolve_path(ctx.cwd, _str_arg(args, "path"))
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("'content' must be a string.")
    append = args.get("append", False)
    if not isinstance(append, bool):
        raise ToolError("'append' must be true or false.")
    verdict = classify_write_path(str(path))
    action = approval_action(
        verdict, policy=ctx.approval_policy, has_approver=ctx.approver is not None
    )
    if action == "ask":
        assert ctx.approver is not None
        if not await ctx.approver(f"Allow writing {path} ({verdict.reason})?"):
            return f"Refused: the user declined writing {path}. It was not written."
    elif action == "refuse":
        log.warning("file_write_refused", reason=verdict.reason)
        return f"Refused: writing {path} would be destructive ({verdict.reason}). Not written."
    written = await asyncio.to_thread(_write, path, content, append)
    log.debug("file_written", bytes=written, append=append)
    verb = "Appended" if append else "Wrote"
    return f"{verb} {written} bytes to {path}."


def _read_window(path: Path, offset: int, limit: int) -> ReadWindow:
    if not path.exists():
        raise ToolError(f"no such file: {path}")
    if path.is_dir():
        raise ToolError(f"{path} is a directory, not a file; list it with the terminal tool.")
    with path.open("rb") as handle:
        if b"\0" in handle.read(_SNIFF_BYTES):
            raise ToolError(f"{path} looks like a binary file; only text files can be read.")
        handle.seek(0)
        lines: list[str] = []
        total = 0
        for total, raw in enumerate(handle, start=1):
            if offset <= total < offset + limit:
                lines.append(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
    return ReadWindow(lines=tuple(lines), first_line=offset, total_lines=total)


def _write(path: Path, content: str, append: bool) -> int:
    if path.is_dir():
        raise ToolError(f"{path} is a directory.")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    with path.open("ab" if append else "wb") as handle:
        handle.write(data)
    return len(data)


def _str_arg(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value:
        raise ToolError(f"'{name}' must be a non-empty string.")
    return value


def _int_arg(args: dict[str, Any], name: str, *, default: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"'{name}' must be a positive integer.")
    return value
