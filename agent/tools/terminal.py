"""The `terminal` tool: run a shell command with a deadline, guarded by the shell policy.

`shell_policy.assess_command` judges the command from its syntax tree; `approval.decide_action`
turns that into run, ask (the exact command is shown) or refuse (the reason goes back to the
model). `sandbox.place_command` then decides where it runs: in the bubblewrap sandbox by default,
on the host only after a person approved `outside_sandbox` (or with `tools.terminal.sandbox:
none`), and nowhere when nobody could approve and bubblewrap is missing. The command gets a
scrubbed environment and its own session (process group), so a timeout or a cancelled turn can
kill everything it started; in the sandbox nothing outlives the command. Output (stdout and stderr interleaved) is kept in
bounded head and tail buffers, so a command that prints gigabytes cannot exhaust memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from agent.access import ApprovalRequest
from agent.errors import ToolError
from agent.providers.base import ToolSpec
from agent.tools.approval import ToolAction, decide_action
from agent.tools.registry import Tool, ToolContext
from agent.tools.sandbox import Placement, command_argv, place_command
from agent.tools.shell_policy import assess_command

__all__ = [
    "CommandResult",
    "effective_timeout_s",
    "render_result",
    "run_command",
    "terminal_tool",
    "truncate_middle",
]

log = structlog.get_logger(__name__)

TIMEOUT_MARGIN_S = 1.0
"""Our own deadline fires this much before the registry's, so the partial output is reported."""
_READ_CHUNK = 65_536
_REAP_TIMEOUT_S = 2.0

_SPEC = ToolSpec(
    name="terminal",
    description="Run a bash command in a sandbox (workspace writable, empty home, no network).",
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout_s": {"type": "number", "description": "Seconds before it is killed."},
            "cwd": {"type": "string", "description": "Working directory."},
            "outside_sandbox": {"type": "boolean", "description": "Ask to run it unsandboxed."},
        },
        "required": ["command"],
    },
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """What a finished (or killed) command produced."""

    output: str
    exit_code: int | None
    """None when the command was killed at its deadline."""
    timed_out: bool
    deadline_s: float
    """The deadline it was given: what a timed-out command reports, however late the kill."""
    duration_s: float
    cut_chars: int = 0


def terminal_tool() -> Tool:
    """The `terminal` tool for a `ToolRegistry`."""
    return Tool(spec=_SPEC, handler=_handle)


def effective_timeout_s(requested_s: float | None, ctx_timeout_s: float) -> float:
    """The command's deadline: as asked, but always before the registry's own deadline."""
    margin_s = min(TIMEOUT_MARGIN_S, ctx_timeout_s * 0.1)
    ceiling_s = ctx_timeout_s - margin_s
    if requested_s is None:
        return ceiling_s
    return max(0.01, min(requested_s, ceiling_s))


def truncate_middle(text: str, max_chars: int, *, already_cut: int = 0) -> tuple[str, int]:
    """Keep the head and tail of `text` within `max_chars`; return it and the characters cut."""
    if len(text) <= max_chars and not already_cut:
        return text, 0
    keep = min(len(text), max_chars)
    head = keep // 2
    tail = keep - head
    cut = len(text) - keep + already_cut
    middle = f"\n[... {cut} characters cut ...]\n"
    return text[:head] + middle + (text[len(text) - tail :] if tail else ""), cut


def render_result(result: CommandResult) -> str:
    """The text the model sees for a finished command."""
    body = result.output if result.output else "(no output)"
    if result.timed_out:
        status = f"[timed out after {result.deadline_s:.1f} s; the process group was killed]"
    else:
        status = f"[exit code {result.exit_code}]"
    return f"{body.rstrip()}\n{status}"


async def run_command(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, max_chars: int
) -> CommandResult:
    """Run `argv` in a new process group with exactly `env`; kill the group at the deadline."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    buffer = _OutputBuffer(limit_bytes=max_chars * 4)
    timed_out = False
    try:
        async with asyncio.timeout(timeout_s):
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(_READ_CHUNK):
                buffer.add(chunk)
            await proc.wait()
    except TimeoutError:
        timed_out = True
    finally:
        if proc.returncode is None or timed_out:
            await _kill_group(proc)
    text, cut = truncate_middle(buffer.text(), max_chars, already_cut=buffer.dropped_bytes)
    return CommandResult(
        output=text,
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        deadline_s=timeout_s,
        duration_s=time.monotonic() - started,
        cut_chars=cut,
    )


async def _handle(args: dict[str, Any], ctx: ToolContext) -> str:
    command, timeout_s, cwd = _parse_args(args, ctx)
    outside = args.get("outside_sandbox", False)
    if not isinstance(outside, bool):
        raise ToolError("'outside_sandbox' must be true or false.")
    workspace = ctx.the_workspace()
    verdict = assess_command(command, cwd=cwd, workspace=workspace)
    action = decide_action(verdict.level, mode=ctx.approval_policy, can_ask=ctx.can_ask)
    placement = place_command(ctx.terminal, can_ask=ctx.can_ask, outside=outside)
    if action == "refuse":
        log.warning("command_refused", level=verdict.level, reason=verdict.reason)
        return _refusal(verdict.level, verdict.reason, ctx)
    sandboxed = placement.where == "sandbox"
    if sandboxed and workspace.contains(workspace.home):
        return (
            f"Refused: the workspace {workspace.root} holds the home directory, so the sandbox "
            "cannot keep the home out of reach; set tools.workspace to a project directory. "
            "It was not run."
        )
    refused = await _settle(command, action, verdict.reason, placement, ctx)
    if refused is not None:
        return refused
    argv = command_argv(
        command,
        ctx.terminal,
        cwd=cwd,
        workspace=workspace.root,
        home=workspace.home,
        sandboxed=sandboxed,
    )
    result = await run_command(
        argv,
        cwd=cwd,
        env=dict(ctx.terminal.env),
        timeout_s=timeout_s,
        max_chars=ctx.max_output_chars,
    )
    log.info(
        "command_finished",
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=round(result.duration_s, 3),
        cut_chars=result.cut_chars,
        sandboxed=sandboxed,
    )
    return render_result(result)


async def _settle(
    command: str, action: ToolAction, reason: str, placement: Placement, ctx: ToolContext
) -> str | None:
    """Ask once for what needs a person (the policy's ask, running outside the sandbox, or
    both); None when the command may run, else the refusal for the model."""
    if placement.where == "refuse":
        log.warning("command_refused", level="sandbox", reason=placement.reason)
        return f"Refused: {placement.reason}. It was not run."
    reasons = [r for r in (placement.ask, reason if action == "ask" else None) if r]
    if not reasons:
        return None
    request = ApprovalRequest(kind="command", subject=command, reason="; ".join(reasons))
    if await ctx.approve(request):
        return None
    return f"Refused: the user declined this command ({request.reason}). Do not retry it."


def _parse_args(args: dict[str, Any], ctx: ToolContext) -> tuple[str, float, Path]:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("terminal needs a non-empty string 'command'.")
    requested = args.get("timeout_s")
    if requested is not None and (
        isinstance(requested, bool) or not isinstance(requested, int | float) or requested <= 0
    ):
        raise ToolError("'timeout_s' must be a positive number of seconds.")
    raw_cwd = args.get("cwd")
    if raw_cwd is not None and not isinstance(raw_cwd, str):
        raise ToolError("'cwd' must be a string path.")
    cwd = ctx.cwd if not raw_cwd else (ctx.cwd / Path(raw_cwd).expanduser()).resolve()
    if not cwd.is_dir():
        raise ToolError(f"working directory {raw_cwd or cwd} does not exist.")
    return command, effective_timeout_s(requested, ctx.timeout_s), cwd


def _refusal(level: str, reason: str, ctx: ToolContext) -> str:
    if ctx.approval_policy == "deny":
        why = "commands that need approval are disabled here (tools.approval = deny)"
    elif level == "unlisted":
        why = "nobody can approve here, so only allowlisted programs run"
    else:
        why = "it needs a person's approval and nobody can approve here"
    return f"Refused: {reason}; {why}. It was not run."


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command's whole process group and reap the shell."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_REAP_TIMEOUT_S):
            await proc.wait()


class _OutputBuffer:
    """The first and last `limit_bytes` of a stream, and how many bytes fell in between."""

    __slots__ = ("_head", "_limit", "_tail", "dropped_bytes")

    def __init__(self, *, limit_bytes: int) -> None:
        self._limit = limit_bytes
        self._head = bytearray()
        self._tail = bytearray()
        self.dropped_bytes = 0

    def add(self, chunk: bytes) -> None:
        room = self._limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        excess = len(self._tail) - self._limit
        if excess > 0:
            del self._tail[:excess]
            self.dropped_bytes += excess

    def text(self) -> str:
        return (bytes(self._head) + bytes(self._tail)).decode("utf-8", errors="replace")
