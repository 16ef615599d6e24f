"""Tool calls as they run, for whoever watches (the terminal shows each one): events through
the runtime's event sink, found in `ToolContext.services["on_event"]` (absent: nobody watches).

`ToolStarted` (`tool:start`) carries the tool's name and its arguments on one line (a command as
typed); `ToolFinished` (`tool:end`) the result as the model will read it, redacted, at most
`PREVIEW_CHARS`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from agent.events import EventSink, ToolFinished, ToolStarted
from agent.redaction import redact_text

__all__ = ["PREVIEW_CHARS", "one_line_arguments", "tool_finished", "tool_started"]

PREVIEW_CHARS = 4_000


class ToolContext(Protocol):
    """What progress needs of `agent.tools.registry.ToolContext`."""

    @property
    def session_id(self) -> str: ...

    @property
    def services(self) -> dict[str, Any]: ...


def one_line_arguments(args: Mapping[str, Any]) -> str:
    """Pure: a command as typed for `{"command": …}`, else the JSON object, on one line."""
    command = args.get("command")
    if isinstance(command, str) and command.strip():
        shown = command
    elif isinstance(args.get("path"), str):
        shown = str(args["path"])
    else:
        shown = json.dumps(dict(args), ensure_ascii=False, separators=(", ", ": "))
    return " ⏎ ".join(line.strip() for line in shown.strip().splitlines() if line.strip())


def tool_started(ctx: ToolContext, name: str, args: Mapping[str, Any]) -> None:
    if (emit := _sink(ctx)) is not None:
        shown = redact_text(one_line_arguments(args))
        emit(ToolStarted(session_id=ctx.session_id, tool=name, arguments=shown))


def tool_finished(ctx: ToolContext, name: str, result: str) -> None:
    if (emit := _sink(ctx)) is not None:
        shown = redact_text(result[:PREVIEW_CHARS])
        emit(ToolFinished(session_id=ctx.session_id, tool=name, result=shown))


def _sink(ctx: ToolContext) -> EventSink | None:
    emit = ctx.services.get("on_event")
    return emit if callable(emit) else None
