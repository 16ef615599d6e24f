"""Images fitted to what a provider accepts: the size rule, Pillow's resize and re-encode, and
what an image costs in tokens. Pure functions of bytes and numbers.

Limits, from the providers' vision guides:
- Anthropic: an image whose long side passes 1568 px is scaled down by the server anyway (we do
  it first); at most 5 MB per image; tokens ≈ width × height / 750.
- OpenAI (Chat Completions and Responses, detail "high"/"auto"): the image is fitted into
  2048 × 2048, then its short side scaled to 768; it costs 85 + 170 per 512-px tile.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Literal, TypeAlias, assert_never

__all__ = [
    "ANTHROPIC_LONG_SIDE",
    "OPENAI_LONG_SIDE",
    "FittedImage",
    "ImageRoute",
    "anthropic_image_tokens",
    "estimate_image_tokens",
    "fit_image",
    "fitted_size",
    "long_side_for",
    "openai_image_tokens",
]

ImageRoute: TypeAlias = Literal["anthropic", "openai"]
ANTHROPIC_LONG_SIDE = 1568
OPENAI_LONG_SIDE = 2048
MAX_SENT_BYTES = 3_750_000
"""Anthropic refuses an image over 5 MB once base64-encoded (4/3 larger): stay below it."""
JPEG_QUALITY = 85


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedImage:
    """An image as it goes to a model."""

    data: bytes
    mime: Literal["image/jpeg", "image/png"]
    width: int
    height: int


def long_side_for(route: ImageRoute) -> int:
    match route:
        case "anthropic":
            return ANTHROPIC_LONG_SIDE
        case "openai":
            return OPENAI_LONG_SIDE
        case unreachable:
            assert_never(unreachable)


def fitted_size(width: int, height: int, long_side: int) -> tuple[int, int]:
    """(width, height) scaled down, aspect kept, so the longer side is at most `long_side`."""
    longest = max(width, height)
    if longest <= long_side:
        return width, height
    scale = long_side / longest
    return max(1, round(width * scale)), max(1, round(height * scale))


def anthropic_image_tokens(width: int, height: int) -> int:
    w, h = fitted_size(width, height, ANTHROPIC_LONG_SIDE)
    return math.ceil(w * h / 750)


def openai_image_tokens(width: int, height: int) -> int:
    w, h = fitted_size(width, height, OPENAI_LONG_SIDE)
    short = min(w, h)
    if short > 768:
        scale = 768 / short
        w, h = max(1, round(w * scale)), max(1, round(h * scale))
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return 85 + 170 * tiles


def estimate_image_tokens(width: int | None, height: int | None) -> int:
    """What one image costs on the dearer of the two rules (the estimate must not run short);
    an image of unknown size counts as the largest either rule allows."""
    if not width or not height:
        width, height = OPENAI_LONG_SIDE, OPENAI_LONG_SIDE
    return max(anthropic_image_tokens(width, height), openai_image_tokens(width, height))


def fit_image(data: bytes, route: ImageRoute) -> FittedImage:
    """`data` decoded, turned upright (EXIF), scaled to the route's long side and re-encoded as
    JPEG (PNG when it has transparency), metadata dropped. Raises ValueError on bytes Pillow
    cannot read."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.seek(0)  # the first frame of an animation
            img = ImageOps.exif_transpose(opened)
            img.load()
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise ValueError(f"not a readable image: {type(exc).__name__}") from exc
    size = fitted_size(img.width, img.height, long_side_for(route))
    if size != img.size:
        img = img.resize(size, Image.Resampling.LANCZOS)
    has_alpha = img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)
    out = io.BytesIO()
    if has_alpha:
        img.convert("RGBA").save(out, format="PNG", optimize=True)
        mime: Literal["image/jpeg", "image/png"] = "image/png"
    else:
        img.convert("RGB").save(out, format="JPEG", quality=JPEG_QUALITY)
        mime = "image/jpeg"
    encoded = out.getvalue()
    quality = JPEG_QUALITY
    while len(encoded) > MAX_SENT_BYTES and quality > 40:  # rare: a noisy photo at full size
        quality -= 15
        out = io.BytesIO()
        img.convert("RGB").save(out, format="JPEG", quality=quality)
        encoded, mime = out.getvalue(), "image/jpeg"
    return FittedImage(data=encoded, mime=mime, width=img.width, height=img.height)
