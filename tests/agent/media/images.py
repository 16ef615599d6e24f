"""Real image, audio and PDF bytes for the media tests, made with Pillow (no files on disk)."""

from __future__ import annotations

import io
import random


def png(width: int = 64, height: int = 48, *, alpha: bool = False) -> bytes:
    from PIL import Image

    mode = "RGBA" if alpha else "RGB"
    img = Image.new(mode, (width, height), (200, 30, 30, 128) if alpha else (200, 30, 30))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def jpeg(width: int = 64, height: int = 48, *, noise: bool = False, seed: int = 0) -> bytes:
    from PIL import Image

    if noise:  # incompressible: a photo-sized file from few pixels
        rng = random.Random(seed)
        img = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    else:
        img = Image.new("RGB", (width, height), (10, 120, 200 - seed % 200))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=95)
    return out.getvalue()


def ogg_voice(seconds: int = 1) -> bytes:
    """Bytes that start as an Ogg Opus stream does (what a Telegram voice note is)."""
    return b"OggS\x00\x02" + b"\x00" * 20 + b"OpusHead" + b"\x01" * (200 * seconds)


def pdf(text: str = "Invoice 4711: total 99.50 EUR") -> bytes:
    """A one-page PDF whose text layer holds `text` (hand-written objects, ASCII only)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()
