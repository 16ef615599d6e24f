"""What a file is, read from its bytes (never its name): images through Pillow, PDF and audio
by their magic bytes, text by decoding; plus the size limits media is held to."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Literal, TypeAlias, assert_never

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_FILE_BYTES",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_PIXELS",
    "MediaKind",
    "Sniffed",
    "limit_for",
    "sniff",
]

MediaKind: TypeAlias = Literal["image", "audio", "pdf", "text", "other"]

MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""An image larger than this is refused (OpenAI's own limit per image is 20 MB; Telegram's
Bot API serves at most 20 MB through getFile)."""
MAX_IMAGE_PIXELS = 50_000_000
"""A decompression bomb guard: more pixels than this is refused before decoding."""
MAX_FILE_BYTES = 20 * 1024 * 1024
"""Audio and other files: the Bot API's download limit, and OpenAI's 25 MB transcription cap
is above it."""
MAX_DOCUMENT_BYTES = 20 * 1024 * 1024
"""PDF and text files: stored up to this size (the text given to the model is capped apart)."""

_IMAGE_FORMATS = {
    "JPEG": "image/jpeg",
    "PNG": "image/png",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}
"""The formats every vision provider we speak accepts (others are re-encoded to PNG/JPEG)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sniffed:
    """What the bytes are."""

    kind: MediaKind
    mime: str
    width: int | None = None
    height: int | None = None
    """Pixels, for images."""


def limit_for(kind: MediaKind) -> int:
    """The most bytes a file of `kind` may have."""
    match kind:
        case "image":
            return MAX_IMAGE_BYTES
        case "pdf" | "text":
            return MAX_DOCUMENT_BYTES
        case "audio" | "other":
            return MAX_FILE_BYTES
        case unreachable:
            assert_never(unreachable)


def sniff(data: bytes) -> Sniffed:
    """The kind and type of `data`, from its content. An image Pillow cannot read (or one over
    `MAX_IMAGE_PIXELS`) is "other"; an empty file is "other"."""
    if not data:
        return Sniffed(kind="other", mime="application/octet-stream")
    if data.startswith(b"%PDF-"):
        return Sniffed(kind="pdf", mime="application/pdf")
    if (audio := _audio_mime(data)) is not None:
        return Sniffed(kind="audio", mime=audio)
    if (image := _image(data)) is not None:
        return image
    if _is_text(data):
        return Sniffed(kind="text", mime="text/plain")
    return Sniffed(kind="other", mime="application/octet-stream")


def _audio_mime(data: bytes) -> str | None:
    head = data[:12]
    if head.startswith(b"OggS"):
        return "audio/ogg"  # Telegram voice notes: Opus in Ogg
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "audio/mpeg"
    if head[4:8] == b"ftyp" and head[8:12] in (b"M4A ", b"M4B ", b"mp42", b"isom"):
        return "audio/mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "audio/webm"
    return None


def _image(data: bytes) -> Sniffed | None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
            fmt = img.format or ""
            if width * height > MAX_IMAGE_PIXELS or width <= 0 or height <= 0:
                return None
            img.verify()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None
    mime = _IMAGE_FORMATS.get(fmt, f"image/{fmt.lower() or 'unknown'}")
    return Sniffed(kind="image", mime=mime, width=width, height=height)


def _is_text(data: bytes) -> bool:
    sample = data[:65536]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample) - 4  # a character cut by the sample's end
    return True
