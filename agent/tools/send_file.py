"""The `send_file` tool: a file of the workspace goes to the person in this chat after the
reply (Telegram, Discord): an image as a photo, anything else as a document."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import structlog

from agent.errors import ToolError
from agent.media.outbox import OutboundFile, Outbox
from agent.media.sniff import sniff
from agent.providers.base import ToolSpec
from agent.tools.registry import Tool, ToolContext

__all__ = ["MAX_SEND_BYTES", "send_file_tool"]

log = structlog.get_logger(__name__)

MAX_SEND_BYTES = 10 * 1024 * 1024
"""The smaller of the platforms' limits for a bot: Telegram's 10 MB for a photo (documents
may be 50 MB), Discord's 10 MB upload without boosts."""
MAX_PHOTO_SIDE_SUM = 10_000
"""Telegram refuses a photo whose width and height add up to more than this: send it as a
document instead."""
_CHAT_PLATFORMS = frozenset({"telegram", "discord"})

_SPEC = ToolSpec(
    name="send_file",
    description=(
        "Send a file from the workspace to the person you are talking with (Telegram or "
        "Discord): an image arrives as a photo, anything else as a document, right after your "
        "reply. Give `path` (relative to the workspace) and an optional short `caption`."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "e.g. report.pdf or charts/sales.png"},
            "caption": {"type": "string", "description": "A line shown with the file."},
        },
        "required": ["path"],
    },
)


def send_file_tool() -> Tool:
    """The tool to register; it finds the outbox in `ctx.services["outbox"]`."""
    return Tool(spec=_SPEC, handler=_handle, deferrable=True)


async def _handle(args: dict[str, Any], ctx: ToolContext) -> str:
    outbox: Outbox | None = ctx.services.get("outbox")
    platform = ctx.principal.platform if ctx.principal is not None else None
    if outbox is None or platform not in _CHAT_PLATFORMS:
        raise ToolError("send_file works in Telegram and Discord chats only")
    raw = str(args.get("path") or "").strip()
    if not raw:
        raise ToolError("send_file needs a 'path' inside the workspace")
    workspace = ctx.the_workspace()
    path = workspace.resolve(ctx.cwd, raw)
    if workspace.classify(path) != "inside" or workspace.is_private(path):
        raise ToolError(f"send_file sends files inside the workspace only; {raw!r} is not")
    data = await asyncio.to_thread(_read, path)
    found = sniff(data)
    is_photo = (
        found.kind == "image"
        and found.mime in ("image/jpeg", "image/png", "image/webp")
        and (found.width or 0) + (found.height or 0) <= MAX_PHOTO_SIDE_SUM
    )
    caption = str(args["caption"])[:1000] if args.get("caption") else None
    file = OutboundFile(
        name=path.name, data=data, kind="photo" if is_photo else "document", caption=caption
    )
    if not outbox.put(ctx.session_id, file):
        raise ToolError("send_file: enough files are already waiting for this reply")
    log.info("file_queued", kind=file.kind, size_bytes=len(data))
    return f"{path.name} ({len(data):,} bytes) will be sent as a {file.kind} after your reply."


def _read(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ToolError(f"send_file: {path.name!r} is not a file")
        if size > MAX_SEND_BYTES:
            raise ToolError(
                f"send_file: {path.name} is {size / 1_048_576:.1f} MB; chats take at most "
                f"{MAX_SEND_BYTES // 1_048_576} MB"
            )
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise ToolError(f"send_file: no file {path.name!r} in the workspace") from exc
    except OSError as exc:
        raise ToolError(f"send_file: cannot read {path.name!r}: {exc.strerror}") from exc
