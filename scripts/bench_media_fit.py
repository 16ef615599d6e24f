"""What fitting a photo for the model costs: Pillow decode, EXIF turn, resize and re-encode per
route, for typical phone photo sizes; print JSON.

    python scripts/bench_media_fit.py [--repeat 5]

Assumptions: photos are synthetic noisy JPEGs at quality 92 (incompressible like a real photo's
texture, so encode sizes are an upper bound); times are the median of `--repeat` runs on this
machine, one core; the token figures are the estimate's rules (Anthropic w*h/750 after the
1568-px fit, OpenAI 85 + 170 per tile after 2048/768), not a provider's bill. A fitted image is
cached per process (`agent.media.attach.FITTED_CACHE_SIZE`), so the cost is paid once per
image and route, not per request.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.media.image_fit import (  # noqa: E402
    ImageRoute,
    anthropic_image_tokens,
    estimate_image_tokens,
    fit_image,
    openai_image_tokens,
)

SIZES = {"screenshot 1170x2532": (1170, 2532), "photo 4032x3024 (12 MP)": (4032, 3024)}


def _photo(width: int, height: int) -> bytes:
    from PIL import Image

    rng = random.Random(width * height)
    tile = Image.frombytes("RGB", (256, 256), rng.randbytes(256 * 256 * 3))
    img = Image.new("RGB", (width, height))
    for x in range(0, width, 256):
        for y in range(0, height, 256):
            img.paste(tile, (x, y))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=92)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results = {}
    for label, (w, h) in SIZES.items():
        data = _photo(w, h)
        row: dict[str, object] = {"input_bytes": len(data)}
        routes: tuple[ImageRoute, ...] = ("anthropic", "openai")
        for route in routes:
            times, fitted = [], None
            for _ in range(args.repeat):
                started = time.perf_counter()
                fitted = fit_image(data, route)
                times.append(time.perf_counter() - started)
            assert fitted is not None
            row[route] = {
                "median_ms": round(statistics.median(times) * 1000, 1),
                "sent_size": [fitted.width, fitted.height],
                "sent_bytes": len(fitted.data),
            }
        row["tokens"] = {
            "anthropic_rule": anthropic_image_tokens(w, h),
            "openai_rule": openai_image_tokens(w, h),
            "estimate": estimate_image_tokens(w, h),
            "base64_chars_over_4_if_counted_as_text": len(data) * 4 // 3 // 4,
        }
        results[label] = row
    print(json.dumps({"repeat": args.repeat, "results": results}, indent=2))


if __name__ == "__main__":
    main()
