"""The fake model server's values: scripted turns, recorded requests, and what a wire answers with.

`Turn`, `ToolCallSpec`, `RecordedRequest` and `ManualClock` are what tests write and read. The
rest is the contract between the server shell (`_server`) and the three wire formats
(`_anthropic`, `_openai_chat`, `_responses`): a request's `Exchange`, the wire-neutral
`ReplyParts`, an `ErrorReply` to send instead, and the `Answer` to send.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from sim.llm_server._prompt import tokens_of_text

__all__ = [
    "Answer",
    "Api",
    "ErrorReply",
    "Exchange",
    "Family",
    "ManualClock",
    "RecordedRequest",
    "ReplyParts",
    "Responder",
    "Stop",
    "ToolCallSpec",
    "Turn",
    "Wire",
]

Api: TypeAlias = Literal["anthropic", "openai", "responses"]
"""The model wire formats: Anthropic Messages, OpenAI Chat Completions, OpenAI Responses."""
Family: TypeAlias = Literal["anthropic", "openai"]
"""Whose auth headers and error envelope apply (Chat Completions and Responses share OpenAI's)."""
Stop: TypeAlias = Literal["end", "tool_use", "max_tokens"]
Responder: TypeAlias = Callable[[dict[str, Any], str], "Turn | None"]
"""`(request body, api) -> Turn | None`; None lets the script (then the echo) answer."""


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """A tool call the fake model makes; `arguments` is JSON text (it may be invalid on purpose)."""

    name: str
    arguments: str = "{}"
    id: str | None = None
    """The call id on the wire; None draws a fresh one (`toolu_fake_0001`, `call_fake_0001`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One scripted reply on any wire: text and/or tool calls, or an error; optionally delayed."""

    text: str = ""
    tool_calls: Sequence[ToolCallSpec] = ()
    error: tuple[int, str, str] | None = None
    """(HTTP status, API error type, message)."""
    error_param: str | None = None
    """OpenAI envelopes only: `error.param`."""
    error_code: str | None = None
    """OpenAI envelopes only: `error.code`."""
    delay_s: float = 0.0
    retry_after_ms: int | None = 10
    """Sent as `retry-after-ms` on 429 and 5xx errors."""
    stop: Stop | None = None
    """Override the stop reason (default: tool_use when there are tool calls, else end)."""
    reasoning: bool = False
    """Responses API only: an encrypted reasoning item before the message."""
    compaction: bool = False
    """Responses API only: a compaction item even when the threshold was not crossed."""
    stall_after_events: int | None = None
    """Streamed replies only: send this many SSE events, then go silent with the socket open."""
    release: threading.Event | None = None
    """With `stall_after_events`: the silence ends when this is set (from any thread) and the
    rest is sent, as a model that paused mid-reply would (a test reads the screen meanwhile)."""
    event_delay_s: float = 0.0
    """Streamed replies only: pause this long before each SSE event (slow but never silent)."""
    cut_after_events: int | None = None
    """Streamed replies only: send this many SSE events, then end the response cleanly, with no
    finish reason and no `[DONE]` (a proxy or a crashed server that drops the rest)."""
    raw_body: str | None = None
    """Answer 200 with this body instead of a reply (an HTML error page, truncated JSON)."""
    raw_content_type: str = "text/html"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One request exactly as the client sent it."""

    api: str
    """anthropic | openai | responses, or anthropic_count | models | props."""
    path: str
    host: str
    """The Host it was addressed to, lower-cased (`api.openai.com` through `http_client_for`)."""
    headers: dict[str, str]
    """Header names lower-cased."""
    json: dict[str, Any] | None
    """The JSON object sent; None for GETs, bodies that are not one, or `record_bodies=False`."""


@dataclass(slots=True)
class ManualClock:
    """An injectable monotonic clock for TTL tests: `fake.clock = clock; clock.advance(301)`."""

    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReply:
    """An error to answer with: status and the fields of the wire's error envelope."""

    status: int
    type: str
    message: str
    param: str | None = None
    code: str | None = None
    retry_after_ms: int | None = None
    """Sent as `retry-after-ms` (and `retry-after`) when the status is 429 or 5xx."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyParts:
    """What the fake answers with, independent of the wire format."""

    text: str
    tool_calls: Sequence[tuple[str, str, str]] = ()
    """(id, name, arguments JSON text)."""
    stop: Stop = "end"
    reasoning: bool = False
    compaction: bool = False

    @property
    def output_tokens(self) -> int:
        """ceil(chars / 4) of the text and every call's arguments, at least 1."""
        arguments = "".join(a for _, _, a in self.tool_calls)
        return max(tokens_of_text(self.text + arguments), 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """What a wire may know about the request it answers, besides its body."""

    key: str
    """The API key presented (cache scope)."""
    host: str
    """The Host the request was addressed to (issuer of encrypted items)."""
    clock: Callable[[], float]
    min_cache_tokens: int
    reject_context_management: bool
    new_id: Callable[[], int]
    """The server's id counter, shared by all wires."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """A wire's reply: a JSON body, or the SSE frames of a stream; and the usage it reports."""

    usage: dict[str, Any]
    json: dict[str, Any] | None = None
    frames: Sequence[str] = ()
    """Complete `data:` (and `event:`) frames, sent in order when `json` is None."""
    headers: Mapping[str, str] = field(default_factory=dict)


class Wire(Protocol):
    """One wire format: refuses what the real API refuses, reads the user text, builds answers."""

    @property
    def api(self) -> Api: ...

    @property
    def family(self) -> Family: ...

    @property
    def call_prefix(self) -> str: ...

    def refuse(self, body: dict[str, Any], exchange: Exchange) -> ErrorReply | None:
        """The 400 the real API would answer this body with, or None."""
        ...

    def user_text(self, body: dict[str, Any]) -> str:
        """The last user text, for the echo."""
        ...

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """The prompt's size as this wire's usage reports it (chars/4 per block)."""
        ...

    def answer(self, body: dict[str, Any], reply: ReplyParts, exchange: Exchange) -> Answer:
        """The reply in this wire's shape, streamed when the body asks for it."""
        ...
