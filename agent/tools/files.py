"""The `read_file` and `write_file` tools: numbered, bounded reads and parent-creating writes.

Both are confined to the workspace (`agent.tools.workspace`): paths are resolved with `~`, `..`
and every symlink followed (and case folded where the filesystem ignores case) before they are
judged. Reading outside the workspace, or a private file anywhere (`~/.ssh`, HERMES_HOME, …),
needs approval; writing outside the workspace, or to a persistence file anywhere (shell start-up
files, git hooks, a `.git` file that points git elsewhere, `.pth` files), is refused, and so is
a file that reads as git config making git run a program (`core.fsmonitor`, `core.pager`, a
`!` alias): with a `gitdir:` pointer it would run on the next `git status`. Disk work runs in a worker thread so a large file never blocks
the event loop.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_never

import structlog

from agent.access import ApprovalRequest
from agent.errors import ToolError
from agent.providers.base import ToolSpec
from agent.tools.approval import decide_action
from agent.tools.registry import Tool, ToolContext

__all__ = [
    "ReadWindow",
    "git_config_hazard",
    "read_file_tool",
    "render_lines",
    "write_file_tool",
]

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
    workspace = ctx.the_workspace()
    path = workspace.resolve(ctx.cwd, _str_arg(args, "path"))
    offset = _int_arg(args, "offset_line", default=1)
    limit = _int_arg(args, "limit_lines", default=DEFAULT_LIMIT_LINES)
    where = workspace.classify(path)
    if where not in ("inside", "null") or workspace.is_private(path):
        reason = "a private file" if workspace.is_private(path) else "outside the workspace"
        refusal = await _gate(ctx, ApprovalRequest(kind="read", subject=str(path), reason=reason))
        if refusal is not None:
            return refusal
    window = await asyncio.to_thread(_read_window, path, offset, limit)
    log.debug("file_read", lines=len(window.lines), total_lines=window.total_lines)
    return render_lines(window, max_chars=ctx.max_output_chars)


async def _handle_write(args: dict[str, Any], ctx: ToolContext) -> str:
    workspace = ctx.the_workspace()
    path = workspace.resolve(ctx.cwd, _str_arg(args, "path"))
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("'content' must be a string.")
    append = args.get("append", False)
    if not isinstance(append, bool):
        raise ToolError("'append' must be true or false.")
    where = workspace.classify(path)
    if where != "inside":
        log.warning("file_write_refused", where=where)
        why = {"persistence": "a persistence file (it would run code later)",
               "private": "a private file"}.get(where, f"outside the workspace {workspace.root}")  # fmt: skip
        return (
            f"Refused: {path} is {why}; write_file only writes inside the workspace. Not written."
        )
    if (hazard := git_config_hazard(path, content)) is not None:
        log.warning("file_write_refused", where="git_config")
        return f"Refused: {path} reads as git config that {hazard}. Not written."
    written = await asyncio.to_thread(_write, path, content, append)
    log.debug("file_written", bytes=written, append=append)
    verb = "Appended" if append else "Wrote"
    return f"{verb} {written} bytes to {path}."


async def _gate(ctx: ToolContext, request: ApprovalRequest) -> str | None:
    """None when the read may go ahead; else the refusal for the model."""
    match decide_action("opaque", mode=ctx.approval_policy, can_ask=ctx.can_ask):
        case "run":
            return None
        case "ask":
            if await ctx.approve(request):
                return None
            return f"Refused: the user declined reading {request.subject}. It was not read."
        case "refuse":
            log.warning("file_read_refused", reason=request.reason)
            return (
                f"Refused: {request.subject} is {request.reason}; reading it needs a person's "
                "approval and nobody can approve here. It was not read."
            )
        case unreachable:
            assert_never(unreachable)


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


_GIT_RUNS = re.compile(
    r"(?im)^\s*(fsmonitor|hookspath|pager|editor|sshcommand|askpass|gitproxy|textconv|"
    r"external|process|clean|smudge|command)\s*=|^\s*[\w.-]+\s*=\s*\"?!"
)


def git_config_hazard(path: Path, content: str) -> str | None:
    """What a git-config-shaped file would make git run, or None (pure; by name and content)."""
    looks_like_config = path.name in ("config", "config.worktree") or path.suffix == ".gitconfig"
    if not looks_like_config or "[" not in content:
        return None
    if (found := _GIT_RUNS.search(content)) is not None:
        return f"makes git run a program ({found.group(0).strip()})"
    return None


def _int_arg(args: dict[str, Any], name: str, *, default: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"'{name}' must be a positive integer.")
    return value
