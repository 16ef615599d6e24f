"""The value types every layer shares: canonical chat messages, token usage, session records.

They live at the bottom (the store persists them), and `agent.messages` / `agent.providers`
re-export them, so agent code keeps importing from its own layer. See `agent.messages` for the
meaning of every key; this module only declares the shapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeAlias, TypedDict, TypeVar

from state.owners import LOCAL_OWNER

__all__ = [
    "LOCAL_OWNER",
    "ArchivedRow",
    "ChatMessage",
    "Instruction",
    "InstructionKind",
    "InstructionStatus",
    "JobInfo",
    "JobSpec",
    "MemoryEntry",
    "MemoryHit",
    "MemoryKind",
    "MemoryOrigin",
    "MessageKind",
    "ReadScope",
    "SearchHit",
    "SessionInfo",
    "ToolCall",
    "ToolFunction",
    "Usage",
    "MAX_ID_CHARS",
    "MAX_MEMORY_CHARS",
    "content_text",
    "storable",
    "storable_text",
]

MAX_MEMORY_CHARS = 4_000
"""The longest memory entry kept; longer text is refused (a note is a fact, not a document)."""
MAX_ID_CHARS = 1024
"""The longest user id, chat key, tool call id or tool name the store keeps (its columns)."""

MessageKind: TypeAlias = Literal["normal", "summary"]
InstructionKind: TypeAlias = Literal["detected", "pin"]
"""Where a standing instruction came from: found in a user message, or `/pin TEXT`."""
InstructionStatus: TypeAlias = Literal["active", "superseded", "removed"]
MemoryKind: TypeAlias = Literal["profile", "note"]
"""A profile entry (short, shown at every session start) or a note (searched when relevant)."""
MemoryOrigin: TypeAlias = Literal["tool", "compaction", "ledger", "user"]
"""Who wrote it: the model's `memory` tool, a compaction's fact extraction, a standing
instruction about the person, or the person themselves (`hermes memory add`)."""


class ToolFunction(TypedDict):
    name: str
    arguments: str


class ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ToolFunction


class ChatMessage(TypedDict, total=False):
    role: str
    content: str | list[dict[str, Any]] | None
    tool_calls: list[ToolCall]
    tool_call_id: str
    name: str
    cache_control: dict[str, str]
    _id: int
    _persisted: bool
    _kind: MessageKind
    _created_at: float
    _media: list[dict[str, Any]]
    """References to stored files (`agent.media.refs`), never their bytes."""


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""NUL (PostgreSQL refuses it in text and JSON) and surrogates (UTF-8 cannot encode them:
they come from undecodable bytes, e.g. `sys.argv` under surrogateescape, or a JSON escape)."""
REPLACEMENT = "\ufffd"
_V = TypeVar("_V")


def storable_text(text: str) -> str:
    """`text` as every database and every provider accepts it: a surrogate pair becomes its
    character, a lone surrogate or a NUL becomes U+FFFD. Unchanged (the same object) when
    there is nothing to replace, which is nearly always."""
    if _UNSTORABLE.search(text) is None:
        return text
    paired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return paired.replace("\x00", REPLACEMENT)


def storable(value: _V) -> _V:
    """`storable_text` applied to every string inside `value` (dicts, lists, tuples), keys
    too. Returns `value` itself when nothing needed replacing."""
    if isinstance(value, str):
        return storable_text(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        items = [(storable(k), storable(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)  # type: ignore[return-value]
    if isinstance(value, list | tuple):
        cleaned = [storable(v) for v in value]
        if all(v is v0 for v, v0 in zip(cleaned, value, strict=True)):
            return value
        return type(value)(cleaned)
    return value


def content_text(msg: ChatMessage) -> str:
    """All text of a message's content, blocks joined; tool-call arguments are not included."""
    content = msg.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [str(b.get("text", "")) for b in content if isinstance(b, dict)]
    return "".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage of one model call, normalised across providers."""

    input_tokens: int = 0
    """Prompt tokens billed at the full input price (neither written to nor read from cache)."""
    output_tokens: int = 0
    cache_write_tokens: int = 0
    """Anthropic `cache_creation_input_tokens`; OpenAI has none we can see."""
    cache_read_tokens: int = 0
    """Anthropic `cache_read_input_tokens`; OpenAI `prompt_tokens_details.cached_tokens`."""

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read: the number compaction triggers on."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """One session's row: identity, routing, counters and its small meta dict."""

    id: str
    platform: str
    chat_key: str | None
    user_id: str | None
    title: str | None
    model: str | None
    created_at: float
    updated_at: float
    parent_session_id: str | None
    end_reason: str | None
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    last_prompt_tokens: int
    compactions: int
    micro_compactions: int
    active_messages: int
    total_messages: int
    meta: dict[str, Any]
    native_compactions: int = 0
    version: int = 0
    owner: str = LOCAL_OWNER
    """Who the session belongs to (`state.owners`)."""

    @property
    def usage(self) -> Usage:
        """The session's token totals over every model call."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_write_tokens=self.cache_write_tokens,
            cache_read_tokens=self.cache_read_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    """A search match: where it is, a highlighted snippet, whether it is still active."""

    session_id: str
    message_id: int
    role: str
    snippet: str
    created_at: float
    active: bool
    platform: str
    rank: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchivedRow:
    """One stored message as `recall` shows it: the verbatim text, its id, whether it is active."""

    id: int
    session_id: str
    role: str
    text: str
    """The content text (blocks joined); tool-call arguments are in `tool_calls`."""
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None
    """The tool's name, on a tool result."""
    kind: MessageKind = "normal"
    active: bool = False
    created_at: float = 0.0
    media: tuple[dict[str, Any], ...] = ()
    """References to the files the message carried (its `_media`), never their bytes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Instruction:
    """One entry of a session's standing-instructions ledger, kept verbatim."""

    id: int
    session_id: str
    text: str
    """The user's own words, exactly as given."""
    kind: InstructionKind
    source_message_id: int | None = None
    """The row the instruction was found in (None for `/pin`)."""
    supersedes_id: int | None = None
    """The earlier entry this one replaced."""
    status: InstructionStatus = "active"
    created_at: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """A job to create (see `state.models.JobRow` for what each field means)."""

    owner: str
    kind: str = "job"
    target_kind: str
    target_platform: str | None = None
    target_chat: str | None = None
    target_thread: str | None = None
    target_key: str | None = None
    target_session: str | None = None
    schedule: str
    timezone: str = "UTC"
    prompt: str
    model: str | None = None
    quiet_hours: str | None = None
    catch_up: str = "once"
    next_run_at: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo:
    """One job as stored."""

    id: int
    owner: str
    kind: str
    target_kind: str
    target_platform: str | None
    target_chat: str | None
    target_thread: str | None
    target_key: str | None
    target_session: str | None
    schedule: str
    timezone: str
    prompt: str
    model: str | None
    quiet_hours: str | None
    catch_up: str
    paused: bool
    created_at: float
    next_run_at: float | None
    last_run_at: float | None
    last_outcome: str | None
    last_error: str | None
    failures: int
    runs: int
    claimed_by: str | None
    claimed_until: float | None
    claim_due: float | None
    claim_count: int
    delivered_due: float | None

    def as_dict(self) -> dict[str, Any]:
        """Every field (for `hermes cron list --json`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadScope:
    """Whose sessions a reader may read."""

    owner: str
    """The owner the reader acts as: what it creates is theirs, what it reads must be."""
    everyone: bool = False
    """Widened by config for an admin (`privacy.admins_read_all`): every owner's sessions."""

    def may_read(self, owner: str | None) -> bool:
        return self.everyone or owner == self.owner

    @property
    def owner_filter(self) -> str | None:
        """The owner a query must match; None (no filter) only when widened."""
        return None if self.everyone else self.owner


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """One thing remembered about one person (`owner` is `Principal.owner`)."""

    id: int
    owner: str
    kind: MemoryKind
    text: str
    origin: MemoryOrigin
    created_at: float
    source_session_id: str | None = None
    """The session it was learned in, if any."""
    first_row_id: int | None = None
    """The anchor of the source rows in that session (`[#first–#last]`), if known."""
    last_row_id: int | None = None
    superseded_by: int | None = None
    """The entry that corrected this one; a superseded entry is history, not memory."""
    deleted: bool = False
    """Forgotten: its text is erased and it is gone from search and from every context."""

    @property
    def is_current(self) -> bool:
        return not self.deleted and self.superseded_by is None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHit:
    """A memory entry found by a search, with its rank (higher is better)."""

    entry: MemoryEntry
    rank: float
