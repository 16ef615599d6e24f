"""Windows learned from providers' overflow errors, remembered per endpoint and model.

A local server that reports no window (llama-cpp-python, some vLLM and Ollama set-ups) names it
in its first "maximum context length is 8192 tokens" error. Once learned, it is kept in
`HERMES_HOME/context_windows.json`, so the next start begins with the right window instead of
the 128K guess. Writes are atomic (temp file, then rename); an unreadable file is ignored.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import structlog

__all__ = ["WINDOW_MEMORY_FILE", "WindowMemory"]

WINDOW_MEMORY_FILE = "context_windows.json"

log = structlog.get_logger(__name__)


class WindowMemory:
    """`{"<base_url> <model>": tokens}` in one small JSON file."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def learned(self, base_url: str | None, model: str) -> int | None:
        value = self._read().get(_key(base_url, model))
        return value if isinstance(value, int) and value > 0 else None

    def remember(self, base_url: str | None, model: str, tokens: int) -> None:
        """Keep `tokens` as the window of `model` at `base_url`; a failed write only logs."""
        entries = self._read()
        entries[_key(base_url, model)] = tokens
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
