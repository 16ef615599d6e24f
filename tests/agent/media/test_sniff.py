"""What a file is comes from its bytes, never its name."""

from __future__ import annotations

import pytest

from agent.media import limit_for, sniff
from agent.media.sniff import MAX_IMAGE_BYTES
from tests.agent.media.images import jpeg, ogg_voice, pdf, png


@pytest.mark.parametrize(
    ("data", "kind", "mime"),
    [
        (png(30, 20), "image", "image/png"),
        (jpeg(30, 20), "image", "image/jpeg"),
        (pdf(), "pdf", "application/pdf"),
        (ogg_voice(), "audio", "audio/ogg"),
        (b"ID3\x04\x00" + b"\x00" * 40, "audio", "audio/mpeg"),
        (b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 30, "audio", "audio/wav"),
        ("# notes\nß and 日本語\n".encode(), "text", "text/plain"),
        (b"\x00\x01\x02binary\xff\xfe", "other", "application/octet-stream"),
        (b"", "other", "application/octet-stream"),
        (b"\x89PNG\r\n\x1a\n" + b"garbage" * 10, "other", "application/octet-stream"),
    ],
)
def test_sniff_reads_the_bytes(data: bytes, kind: str, mime: str) -> None:
    """Images (Pillow), PDF and audio (magic bytes), UTF-8 text; a broken PNG is not an image."""
    found = sniff(data)
    assert (found.kind, found.mime) == (kind, mime)


def test_sniff_gives_image_size() -> None:
    """An image's pixel size is read from its header."""
    found = sniff(png(123, 45))
    assert (found.width, found.height) == (123, 45)


def test_sniff_refuses_a_decompression_bomb() -> None:
    """A tiny file declaring a gigantic image is not taken as an image."""
    from PIL import Image

    header = png(1, 1)
    # Rewrite the IHDR width/height to 60000 x 60000 (3.6 gigapixels), fixing its CRC.
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    bomb = header[:8] + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    bomb += header[8 + 25 :]
    assert Image.MAX_IMAGE_PIXELS is not None
    assert sniff(bomb).kind == "other"


def test_limits_are_per_kind() -> None:
    """Images are held to the image limit."""
    assert limit_for("image") == MAX_IMAGE_BYTES
