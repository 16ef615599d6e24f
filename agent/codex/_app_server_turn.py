"""Fold codex app-server notifications for one turn into its outcome: pure, no I/O.

A turn streams `item/agentMessage/delta`, `item/started`/`item/completed` (agent messages,
`contextCompaction`), `thread/tokenUsage/updated` and `error`, and ends with `turn/completed`.
The deprecated `thread/compacted` notification is folded into the same compaction record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.providers._error_kinds import ErrorKind
from agent.providers._usage import UsageShape, usage_from_openai_style
from agent.providers.base import Usage

__all__ = [
    "APP_SERVER_USAGE",
    "CompactionSeen",
    "TurnCollector",
    "error_kind_for",
]

_ERROR_KINDS: dict[str, ErrorKind] = {
    "contextwindowexceeded": "context_too_long",
    "usagelimitexceeded": "rate_limited",
    "unauthorized": "auth",
    "badrequest": "bad_request",
}
APP_SERVER_USAGE = UsageShape(
    prompt="inputTokens",
    output="outputTokens",
    details=None,
    cached="cachedInputTokens",
    written="cacheWriteInputTokens",
)
"""A `TokenUsageBreakdown`: flat camelCase keys, OpenAI semantics (cached inside `inputTokens`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSeen:
    """The server compacted the thread during a turn."""

    thread_id: str
    turn_id: str
    item_id: str | None


@dataclass(slots=True, kw_only=True)
class TurnCollector:
    """Feed it every notification (`add`); it keeps only what belongs to `thread_id`."""

    thread_id: str
    turn_id: str | None = None
    done: bool = False
    status: str = ""
    error_message: str = ""
    error_info: str = ""
    usage: Usage | None = None
    context_window: int | None = None
    compactions: list[CompactionSeen] = field(default_factory=list)
    _texts: dict[str, str] = field(default_factory=dict)
    _order: list[str] = field(default_factory=list)

    def add(self, note: dict[str, Any]) -> str | None:
        """Take one notification; return text to stream, if any."""
        params = note.get("params") or {}
        if params.get("threadId", self.thread_id) != self.thread_id or self.done:
            return None
        method = note.get("method")
        if method == "item/agentMessage/delta":
            return self._delta(str(params.get("itemId") or ""), str(params.get("delta") or ""))
        if method == "item/completed":
            self._completed(params)
        elif method == "turn/started":
            self.turn_id = self.turn_id or _turn_id(params)
        elif method == "thread/tokenUsage/updated":
            self._usage(params.get("tokenUsage") or {})
        elif method == "thread/compacted":
            self._compacted(str(params.get("turnId") or self.turn_id or ""), None)
        elif method == "error":
            self._error(params.get("error") or {})
        elif method == "turn/completed":
            self._turn_completed(params.get("turn") or {})
        return None

    @property
    def text(self) -> str:
        """The agent's messages of this turn, in order, blank-line separated."""
        return "\n\n".join(t for t in (self._texts[i] for i in self._order) if t)

    def _delta(self, item_id: str, delta: str) -> str | None:
        if not delta:
            return None
        if item_id not in self._texts:
            separator = "\n\n" if self.text else ""
            self._order.append(item_id)
            self._texts[item_id] = ""
            delta_out = separator + delta
        else:
            delta_out = delta
        self._texts[item_id] += delta
        return delta_out

    def _completed(self, params: dict[str, Any]) -> None:
        item = params.get("item") or {}
        kind, item_id = item.get("type"), str(item.get("id") or "")
        if kind == "agentMessage":
            if item_id not in self._texts:
                self._order.append(item_id)
            self._texts[item_id] = str(item.get("text") or "")
        elif kind == "contextCompaction":
            self._compacted(str(params.get("turnId") or self.turn_id or ""), item_id or None)

    def _compacted(self, turn_id: str, item_id: str | None) -> None:
        for index, seen in enumerate(self.compactions):
            if seen.turn_id == turn_id:  # item and deprecated notification: one compaction
                if seen.item_id is None and item_id is not None:
                    self.compactions[index] = CompactionSeen(
                        thread_id=self.thread_id, turn_id=turn_id, item_id=item_id
                    )
                return
        self.compactions.append(
            CompactionSeen(thread_id=self.thread_id, turn_id=turn_id, item_id=item_id)
        )

    def _usage(self, token_usage: dict[str, Any]) -> None:
        self.usage = usage_from_openai_style(token_usage.get("last") or {}, APP_SERVER_USAGE)
        window = token_usage.get("modelContextWindow")
        self.context_window = int(window) if isinstance(window, int) else self.context_window

    def _error(self, error: dict[str, Any]) -> None:
        self.error_message = str(error.get("message") or self.error_message)
        self.error_info = _info_name(error.get("codexErrorInfo")) or self.error_info

    def _turn_completed(self, turn: dict[str, Any]) -> None:
        self.turn_id = self.turn_id or str(turn.get("id") or "")
        self.status = str(turn.get("status") or "completed")
        if isinstance(turn.get("error"), dict):
            self._error(turn["error"])
        self.done = True


def error_kind_for(status: str, error_info: str) -> ErrorKind:
    """How a failed or interrupted turn maps onto `agent.errors`."""
    if status == "interrupted":
        return "unavailable"
    return _ERROR_KINDS.get(error_info.lower(), "unavailable")


def _info_name(info: Any) -> str:
    """`codexErrorInfo` is a bare variant name or `{variant: {...}}`."""
    if isinstance(info, str):
        return info
    if isinstance(info, dict) and info:
        return str(next(iter(info)))
    return ""


def _turn_id(params: dict[str, Any]) -> str | None:
    turn = params.get("turn") or {}
    return str(turn.get("id")) if turn.get("id") else None
