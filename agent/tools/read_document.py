"""The `read_document` tool: the text of a document the person sent, page by page, read from
the media store as the turn's principal owns it (a file someone else sent is not found)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import structlog

from agent.errors import ToolError
from agent.media.attach import MediaReader
from agent.media.documents import document_text
from agent.media.sniff import sniff
from agent.providers.base import ToolSpec
from agent.tools.args import int_arg
from agent.tools.registry import Tool, ToolContext

__all__ = ["READ_DOCUMENT_MAX_CHARS", "read_document_tool"]

log = structlog.get_logger(__name__)

READ_DOCUMENT_MAX_CHARS = 16_000
"""The most one call returns (less when `tools.max_output_chars` is lower)."""
MAX_DOCUMENT_TEXT_CHARS = 2_000_000
_SHA = re.compile(r"(?:media:)?([0-9a-f]{64})")

_SPEC = ToolSpec(
    name="read_document",
    description=(
        "Read the text of a document the user sent (PDF, text, markdown, code, CSV) that was "
        "too long to show whole. Give `media` as its message names it (media:<sha256>) and "
        "`offset` (a character position) to continue where the last page ended."
    ),
    parameters={
        "type": "object",
        "properties": {
            "media": {"type": "string", "description": "e.g. media:3fa4c2… (64 hex digits)"},
            "offset": {"type": "integer", "minimum": 0},
        },
        "required": ["media"],
    },
)


def read_document_tool() -> Tool:
    """The tool to register; it finds the media store in `ctx.services["media"]`."""
    return Tool(spec=_SPEC, handler=_handle, deferrable=True)


async def _handle(args: dict[str, Any], ctx: ToolContext) -> str:
    media: MediaReader | None = ctx.services.get("media")
    if media is None or ctx.principal is None:
        raise ToolError("read_document is unavailable: no media store in this run")
    found = _SHA.fullmatch(str(args.get("media", "")).strip())
    if found is None:
        raise ToolError("read_document needs 'media' as media:<64 hex digits>")
    data = await media.read(ctx.principal.owner, found.group(1))
    if data is None:  # not stored, or sent by someone else: the same answer
        raise ToolError("read_document: no such document from you")
    kind = sniff(data).kind
    if kind not in ("pdf", "text"):
        raise ToolError(f"read_document: that file is not a document (it is {kind})")
    try:
        doc = await asyncio.to_thread(document_text, data, kind, max_chars=MAX_DOCUMENT_TEXT_CHARS)
    except ValueError as exc:
        raise ToolError(f"read_document: {exc}") from exc
    offset = int_arg(args.get("offset"), default=0, low=0, high=len(doc.text))
    budget = max(1_000, min(ctx.max_output_chars, READ_DOCUMENT_MAX_CHARS))
    page = doc.text[offset : offset + budget]
    end = offset + len(page)
    log.info("document_read", offset=offset, chars=len(page))
    if end < len(doc.text):
        return f"{page}\n[characters {offset:,}–{end:,} of {len(doc.text):,}; continue with offset={end}]"
    return f"{page}\n[end of document: {len(doc.text):,} characters]"
