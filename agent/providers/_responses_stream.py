"""Fold an OpenAI Responses event stream into one final `Response` dict: pure, no SDK import."""

from __future__ import annotations

from typing import Any

__all__ = ["ResponsesStreamAccumulator", "StreamFailed"]


class StreamFailed(Exception):
    """The stream reported `response.failed` or an `error` event; `code` and `message` say why."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ResponsesStreamAccumulator:
    """Takes stream events (as dicts); returns text deltas; keeps the final response.

    `response.completed` / `response.incomplete` carry the whole response. When a server ends
    the stream without one, the items seen in `response.output_item.done` are used instead.
    """

    __slots__ = ("_done_items", "_final", "_meta", "_text")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._final: dict[str, Any] | None = None
        self._done_items: dict[int, dict[str, Any]] = {}
        self._meta: dict[str, Any] = {}

    def add(self, event: dict[str, Any]) -> str | None:
        """Take one event; return the text delta it carries, if any. Raises StreamFailed."""
        kind = event.get("type")
        if kind == "response.output_text.delta":
            delta = str(event.get("delta") or "")
            self._text.append(delta)
            return delta or None
        if kind in ("response.created", "response.in_progress"):
            self._meta = dict(event.get("response") or {})
        elif kind == "response.output_item.done":
            self._done_items[int(event.get("output_index") or 0)] = dict(event.get("item") or {})
        elif kind in ("response.completed", "response.incomplete"):
            self._final = dict(event.get("response") or {})
        elif kind == "response.failed":
            error = (event.get("response") or {}).get("error") or {}
            raise StreamFailed(
                str(error.get("message") or "response failed"), code=error.get("code")
            )
        elif kind == "error":
            raise StreamFailed(str(event.get("message") or "stream error"), code=event.get("code"))
        return None

    def response(self) -> dict[str, Any]:
        """The final response; output items from the done events fill an empty `output`."""
        final = dict(self._final if self._final is not None else self._meta)
        if not final.get("output") and self._done_items:
            final["output"] = [self._done_items[i] for i in sorted(self._done_items)]
        return final

    @property
    def finished(self) -> bool:
        return self._final is not None

    @property
    def has_items(self) -> bool:
        """Some output item was completed (a server that skips the final event still sent it)."""
        return bool(self._done_items)

    @property
    def text(self) -> str:
        """The text streamed so far."""
        return "".join(self._text)
