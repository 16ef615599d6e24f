"""What an image in a request costs, as the real servers bill it: by its pixels (Anthropic
w*h/750 after the 1568-px fit; OpenAI's 512-px tiles), never by its base64 text. An image the
fake cannot decode (or a URL it will not fetch) costs the most either rule allows."""

from __future__ import annotations

import base64
import binascii
import io

from agent.media.image_fit import anthropic_image_tokens, openai_image_tokens

__all__ = ["billed_image_tokens"]

_LARGEST = (2048, 2048)


def billed_image_tokens(data_url_or_b64: str, *, rule: str) -> int:
    """Tokens of one image given as base64 (or a data URL); `rule` is anthropic | openai."""
    width, height = _size(data_url_or_b64)
    if rule == "anthropic":
        return anthropic_image_tokens(width, height)
    return openai_image_tokens(width, height)


def _size(value: str) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError

    payload = value.split(",", 1)[1] if value.startswith("data:") else value
    try:
        with Image.open(io.BytesIO(base64.b64decode(payload, validate=True))) as img:
            return img.size
    except (binascii.Error, ValueError, UnidentifiedImageError, OSError):
        return _LARGEST
