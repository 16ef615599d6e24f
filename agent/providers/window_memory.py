"""Windows learned from providers' overflow errors, remembered per endpoint and model.

A local server that reports no window (llama-cpp-python, some vLLM and Ollama set-ups) names it
in its first "maximum context length is 8192 tokens" error. Once learned, it is kept in
`HERMES_HOME/context_windows.json`, so the next start begins with the right window instead of
the 128K guess. Beside each window it keeps how the server's token count relates to our
chars/4 estimate (`ratio`, `overhead`: `agent.tokens.TokenCalibrator`), so a fresh process's
first request is sized by the server's count, not by a guess that is 5% short. Writes are atomic
(temp file, then rename); an unreadable file is ignored. An entry is `{"window": N, "ratio": r,
"overhead": n}`; a bare number (the first format) is a window.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import structlog

__all__ = ["WINDOW_MEMORY_FILE", "Calibration", "WindowMemory"]

WINDOW_MEMORY_FILE = "context_windows.json"

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """How one model's server counts against the chars/4 estimate, as last learned."""

    ratio: float
    overhead: int = 0


class WindowMemory:
    """`{"<base_url> <model>": {"window": N, "ratio": r, "overhead": n}}` in one JSON file."""

    def __init__(self, path: Path) -> None:
        self._path = path

    @property
    def path(self) -> Path:
        return self._path

    def learned(self, base_url: str | None, model: str) -> int | None:
        value = self._entry(base_url, model).get("window")
        return value if isinstance(value, int) and value > 0 else None

    def calibration(self, base_url: str | None, model: str) -> Calibration | None:
        entry = self._entry(base_url, model)
        ratio, overhead = entry.get("ratio"), entry.get("overhead", 0)
        if not isinstance(ratio, int | float) or not 0 < ratio < 100:
            return None
        return Calibration(
            ratio=float(ratio), overhead=overhead if isinstance(overhead, int) else 0
        )

    def remember(self, base_url: str | None, model: str, tokens: int) -> None:
        """Keep `tokens` as the window of `model` at `base_url`; a failed write only logs."""
        self._update(base_url, model, window=tokens)

    def remember_calibration(self, base_url: str | None, model: str, fit: Calibration) -> None:
        """Keep how `model`'s server counts tokens; a failed write only logs."""
        self._update(base_url, model, ratio=round(fit.ratio, 4), overhead=fit.overhead)

    def _entry(self, base_url: str | None, model: str) -> dict[str, object]:
        value = self._read().get(_key(base_url, model))
        if isinstance(value, int):
            return {"window": value}
        return value if isinstance(value, dict) else {}

    def _update(self, base_url: str | None, model: str, **fields: object) -> None:
        entries = self._read()
        key = _key(base_url, model)
        entries[key] = {**self._entry(base_url, model), **fields}
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._path.parent, prefix=".context_windows.")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(entries, out, indent=1, sort_keys=True)
            os.replace(tmp, self._path)
        except OSError as exc:
            log.warning("context_window_not_saved", path=str(self._path), error=str(exc))

    def _read(self) -> dict[str, object]:
        try:
            data = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def _key(base_url: str | None, model: str) -> str:
    return f"{(base_url or 'default').rstrip('/')} {model}"
