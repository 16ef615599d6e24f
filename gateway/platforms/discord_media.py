"""Discord attachments: fetched from their CDN URL through discord.py (`Attachment.read`), each
within the upload limit Discord itself enforces (25 MB for a bot's guilds without boosts), and
named by what Discord says they are (an image, a voice message, a file)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Sequence

import discord
import structlog

from agent.media import Origin
from agent.media.outbox import OutboundFile
from gateway.platforms.base import InboundFile

__all__ = ["MAX_ATTACHMENT_BYTES", "download_attachments", "upload_file"]

log = structlog.get_logger(__name__)

MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
DOWNLOAD_DEADLINE_S = 120.0


async def download_attachments(
    attachments: Sequence[discord.Attachment], *, timeout_s: float = DOWNLOAD_DEADLINE_S
) -> tuple[InboundFile, ...]:
    """Each attachment's bytes, or an InboundFile saying in one sentence why not."""
    return tuple([await _download(a, timeout_s) for a in attachments])


def _origin(attachment: discord.Attachment) -> Origin:
    if attachment.is_voice_message():
        return "voice"
    kind = (attachment.content_type or "").split("/", 1)[0]
    if kind == "image":
        return "photo"
    return "audio" if kind == "audio" else "document"


async def _download(attachment: discord.Attachment, timeout_s: float) -> InboundFile:
    origin = _origin(attachment)
    name = attachment.filename
    if attachment.size > MAX_ATTACHMENT_BYTES:
        return InboundFile(
            origin=origin,
            data=None,
            name=name,
            declared_size=attachment.size,
            refusal=f"That file is {attachment.size / 1_048_576:.1f} MB; I take files up to 20 MB",
        )
    try:
        async with asyncio.timeout(timeout_s):
            data = await attachment.read()
    except (discord.HTTPException, TimeoutError) as exc:
        log.warning("discord_download_failed", origin=origin, error_type=type(exc).__name__)
        return InboundFile(
            origin=origin,
            data=None,
            name=name,
            declared_size=attachment.size,
            refusal=f"I could not download that {origin} from Discord; please send it again",
        )
    return InboundFile(origin=origin, data=data, name=name, declared_size=attachment.size)


async def upload_file(channel: discord.abc.Messageable, file: OutboundFile) -> discord.Message:
    """`file` as an attachment (a photo shows inline), its caption as the message text."""
    attachment = discord.File(io.BytesIO(file.data), filename=file.name)
    caption = file.caption[:2000] if file.caption else None
    async with asyncio.timeout(DOWNLOAD_DEADLINE_S):
        return await channel.send(content=caption, file=attachment)
