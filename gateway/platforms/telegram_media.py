"""Telegram photos, documents, voice notes and audio: which file to fetch (pure), and fetching
it through the Bot API's getFile step (https://core.telegram.org/bots/api#getfile).

A photo arrives as several sizes (smallest first): we take the largest that bots may download.
"For the moment, bots can download files of up to 20MB in size": a bigger file is refused with
one sentence before asking, and getFile's own "file is too big" is read the same way.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

import structlog
from telegram import Bot, InputFile, Message
from telegram.error import TelegramError

from agent.media.outbox import OutboundFile
from gateway.platforms.base import InboundFile

__all__ = [
    "BOT_API_DOWNLOAD_LIMIT",
    "DOWNLOAD_DEADLINE_S",
    "FileTarget",
    "download_files",
    "file_targets",
]

log = structlog.get_logger(__name__)

BOT_API_DOWNLOAD_LIMIT = 20 * 1024 * 1024
DOWNLOAD_DEADLINE_S = 120.0
"""getFile plus the download of one file (20 MB over a slow link)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileTarget:
    """One file of a message, before download."""

    origin: Literal["photo", "voice", "audio", "document"]
    file_id: str
    size: int | None
    name: str | None = None


def file_targets(message: Message) -> list[FileTarget]:
    """The files `message` carries, in a fixed order; pure."""
    out: list[FileTarget] = []
    if message.photo:
        sizes = sorted(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        fitting = [p for p in sizes if (p.file_size or 0) <= BOT_API_DOWNLOAD_LIMIT]
        best = (fitting or sizes)[-1]
        out.append(FileTarget(origin="photo", file_id=best.file_id, size=best.file_size))
    if message.document is not None:
        doc = message.document
        out.append(
            FileTarget(
                origin="document", file_id=doc.file_id, size=doc.file_size, name=doc.file_name
            )
        )
    if message.voice is not None:
        out.append(
            FileTarget(origin="voice", file_id=message.voice.file_id, size=message.voice.file_size)
        )
    if message.audio is not None:
        audio = message.audio
        out.append(
            FileTarget(
                origin="audio", file_id=audio.file_id, size=audio.file_size, name=audio.file_name
            )
        )
    return out


async def download_files(
    bot: Bot, targets: list[FileTarget], *, timeout_s: float
) -> tuple[InboundFile, ...]:
    """Each target's bytes, or an InboundFile saying in one sentence why not."""
    return tuple([await _download(bot, t, timeout_s) for t in targets])


async def _download(bot: Bot, target: FileTarget, timeout_s: float) -> InboundFile:
    if target.size is not None and target.size > BOT_API_DOWNLOAD_LIMIT:
        return _too_big(target, target.size)
    try:
        async with asyncio.timeout(timeout_s):
            file = await bot.get_file(target.file_id)
            if file.file_size is not None and file.file_size > BOT_API_DOWNLOAD_LIMIT:
                return _too_big(target, file.file_size)
            data = bytes(await file.download_as_bytearray())
    except TelegramError as exc:
        if "too big" in str(exc).lower():
            return _too_big(target, target.size)
        log.warning("telegram_download_failed", origin=target.origin, error_type=type(exc).__name__)
        return _failed(target)
    except TimeoutError:
        log.warning("telegram_download_failed", origin=target.origin, error_type="TimeoutError")
        return _failed(target)
    return InboundFile(origin=target.origin, data=data, name=target.name, declared_size=target.size)


def _too_big(target: FileTarget, size: int | None) -> InboundFile:
    shown = f"{size / 1_048_576:.1f} MB" if size else "over 20 MB"
    return InboundFile(
        origin=target.origin,
        data=None,
        name=target.name,
        declared_size=size,
        refusal=f"That {target.origin} is {shown}; Telegram lets bots download at most 20 MB",
    )


def _failed(target: FileTarget) -> InboundFile:
    return InboundFile(
        origin=target.origin,
        data=None,
        name=target.name,
        declared_size=target.size,
        refusal=f"I could not download that {target.origin} from Telegram; please send it again",
    )


async def upload_file(
    bot: Bot, chat_id: int | str, thread_id: int | None, file: OutboundFile
) -> Message:
    """`file` as a photo (sendPhoto) or a document (sendDocument), with its caption
    (https://core.telegram.org/bots/api#sendphoto, #senddocument)."""
    upload = InputFile(file.data, filename=file.name)
    caption = file.caption[:1024] if file.caption else None
    if file.kind == "photo":
        return await bot.send_photo(
            chat_id=chat_id,
            photo=upload,
            caption=caption,
            message_thread_id=thread_id,
            write_timeout=DOWNLOAD_DEADLINE_S,
        )
    return await bot.send_document(
        chat_id=chat_id,
        document=upload,
        caption=caption,
        message_thread_id=thread_id,
        write_timeout=DOWNLOAD_DEADLINE_S,
    )
