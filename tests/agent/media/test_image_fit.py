"""Images fitted to the providers' limits (their vision guides), and what they cost in tokens."""

from __future__ import annotations

import io

import pytest

from agent.media.image_fit import (
    anthropic_image_tokens,
    estimate_image_tokens,
    fit_image,
    fitted_size,
    openai_image_tokens,
)
from tests.agent.media.images import jpeg, png


@pytest.mark.parametrize(
    ("size", "limit", "expected"),
    [
        ((1000, 800), 1568, (1000, 800)),
        ((4000, 3000), 1568, (1568, 1176)),
        ((3000, 4000), 2048, (1536, 2048)),
        ((10000, 10), 1568, (1568, 2)),
    ],
)
def test_fitted_size_keeps_aspect(
    size: tuple[int, int], limit: int, expected: tuple[int, int]
) -> None:
    """The long side ends at the limit; a small image is left alone."""
    assert fitted_size(*size, limit) == expected


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1000, 1000), 1334),  # Anthropic: 1000*1000/750
        ((4000, 3000), 2459),  # scaled to 1568x1176 first
    ],
)
def test_anthropic_rule(size: tuple[int, int], tokens: int) -> None:
    """Anthropic: about width x height / 750 tokens, after the 1568-px fit."""
    assert anthropic_image_tokens(*size) == tokens


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1024, 1024), 765),  # OpenAI's own example: 768x768, 4 tiles
        ((2048, 4096), 1105),  # OpenAI's example: 768x1536, 6 tiles
        ((100, 100), 255),
    ],
)
def test_openai_tile_rule(size: tuple[int, int], tokens: int) -> None:
    """OpenAI: fit 2048, short side to 768, 85 + 170 per 512-px tile."""
    assert openai_image_tokens(*size) == tokens


def test_estimate_takes_the_dearer_rule() -> None:
    """The estimate never runs short of either provider's count."""
    for w, h in [(100, 100), (1024, 1024), (4000, 3000), (800, 3000)]:
        assert estimate_image_tokens(w, h) >= anthropic_image_tokens(w, h)
        assert estimate_image_tokens(w, h) >= openai_image_tokens(w, h)
    assert estimate_image_tokens(None, None) >= 2000


def test_fit_image_resizes_and_reencodes_for_anthropic() -> None:
    """A 3000x2000 PNG goes to Anthropic as a JPEG with its long side at 1568."""
    from PIL import Image

    fitted = fit_image(png(3000, 2000), "anthropic")
    assert fitted.mime == "image/jpeg"
    with Image.open(io.BytesIO(fitted.data)) as img:
        assert img.format == "JPEG"
        assert img.size == (fitted.width, fitted.height) == (1568, 1045)


def test_fit_image_keeps_transparency_as_png() -> None:
    """An image with an alpha channel stays PNG (JPEG has none)."""
    fitted = fit_image(png(300, 200, alpha=True), "openai")
    assert fitted.mime == "image/png"
    assert (fitted.width, fitted.height) == (300, 200)


def test_fit_image_stays_under_the_byte_cap() -> None:
    """Even an incompressible full-size photo ends under Anthropic's 5 MB (base64) cap."""
    fitted = fit_image(jpeg(2048, 2048, noise=True), "openai")
    assert len(fitted.data) * 4 / 3 < 5 * 1024 * 1024


def test_fit_image_refuses_garbage() -> None:
    """Bytes Pillow cannot read are a ValueError, not a crash."""
    with pytest.raises(ValueError, match="not a readable image"):
        fit_image(b"\x89PNG\r\n\x1a\nnope", "anthropic")
