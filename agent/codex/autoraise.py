"""The gpt-5.5 threshold autoraise on the Codex OAuth route, and its one-time notice."""

from __future__ import annotations

import os
import re
from pathlib import Path

import structlog

__all__ = [
    "AUTORAISE_THRESHOLD",
    "NOTICE_MARKER_FILE",
    "NOTICE_OPT_OUT_COMMAND",
    "OPT_OUT_COMMAND",
    "autoraised_threshold",
    "is_codex_gpt55",
    "notice_for_autoraise",
]

AUTORAISE_THRESHOLD = 0.85
"""The trigger on Codex OAuth gpt-5.5, whose window the backend caps at 272K."""
CODEX_PROVIDER = "openai-codex"
NOTICE_MARKER_FILE = ".codex_gpt55_autoraise_notice"
"""Under HERMES_HOME; holds the raised value the notice was last shown for."""
OPT_OUT_COMMAND = "hermes config set compression.codex_gpt55_autoraise false"
NOTICE_OPT_OUT_COMMAND = "hermes config set compression.codex_gpt55_autoraise_notice false"

_GPT55 = re.compile(r"(?:[\w.-]+/)?gpt-5\.5(?:-[\w.-]+)?", re.IGNORECASE)
"""gpt-5.5 and its dated or suffixed variants (gpt-5.5-2026-01-15, gpt-5.5-codex); not gpt-5.51."""

log = structlog.get_logger(__name__)


def is_codex_gpt55(*, provider: str, model: str) -> bool:
    """True only for gpt-5.5 (any dated/suffixed variant) on the Codex OAuth provider."""
    return provider == CODEX_PROVIDER and _GPT55.fullmatch(model.strip()) is not None


def autoraised_threshold(*, provider: str, model: str, threshold: float, autoraise: bool) -> float:
    """The compression trigger ratio after the autoraise; every other route keeps `threshold`.

    A raise never lowers: a configured threshold above 85% is kept.
    """
    if not autoraise or not is_codex_gpt55(provider=provider, model=model):
        return threshold
    return max(threshold, AUTORAISE_THRESHOLD)


def notice_for_autoraise(home: Path, *, raised: float, notice_enabled: bool) -> str | None:
    """The one-time notice for `raised`, or None when hidden or already shown for this value.

    Shown once per profile: the marker file under `home` records the value it was shown for,
    so a changed raised value notifies once more. A marker that cannot be written is logged
    and the notice is still returned (better twice than never).
    """
    if not notice_enabled:
        return None
    marker = home / NOTICE_MARKER_FILE
    shown = _format_ratio(raised)
    if _read_marker(marker) == shown:
        return None
    try:
        _write_marker(marker, shown)
    except OSError as exc:
        log.warning("autoraise_marker_write_failed", path=str(marker), error=str(exc))
    return _notice_text(raised)


def _notice_text(raised: float) -> str:
    percent = round(raised * 100)
    return (
        f"Codex OAuth caps gpt-5.5 at a 272K-token context window, so Hermes raised the "
        f"compression trigger to {percent}% for this route (about {round(272 * raised)}K tokens). "
        f"To use your global compression.threshold instead: {OPT_OUT_COMMAND}. "
        f"To hide this notice: {NOTICE_OPT_OUT_COMMAND}."
    )


def _format_ratio(value: float) -> str:
    return f"{value:.4f}"


def _read_marker(marker: Path) -> str | None:
    try:
        text = marker.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        log.warning("autoraise_marker_read_failed", path=str(marker), error=str(exc))
        return None
    try:
        return _format_ratio(float(text))
    except ValueError:
        return None


def _write_marker(marker: Path, value: str) -> None:
    """Write atomically, so concurrent inits never see half a marker."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    tmp.write_text(value + "\n", encoding="utf-8")
    os.replace(tmp, marker)
