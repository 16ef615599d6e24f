"""The provider seam: request and reply values, usage, and the `Provider` protocol."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from agent.messages import ChatMessage
from agent.providers.call_options import CallOptions
from state.values import Usage

__all__ = [
    "StreamSilent",
    "IncompleteReply",
    "STREAM_DEADLINE_FACTOR",
    "OnText",
    "Provider",
    "ProviderReply",
    "ProviderRequest",
    "ProviderSettings",
    "StopReason",
    "ToolSpec",
    "Usage",
]

StopReason: TypeAlias = Literal["end", "tool_use", "max_tokens"]
OnText: TypeAlias = Callable[[str], Awaitable[None]]
"""Called with each streamed text delta, in order."""
STREAM_DEADLINE_FACTOR = 5.0
"""Without `stream_deadline_s`, a streamed attempt may take this many times `timeout_s`."""


class IncompleteReply(Exception):
    """Raised by the pure converters: what arrived is not a finished reply (`why`), with the
    text that did arrive (`partial`). The shell turns it into `agent.errors.ReplyCut`."""

    def __init__(self, why: str, *, partial: str = "") -> None:
        super().__init__(why)
        self.why = why
        self.partial = partial


class StreamSilent(Exception):
    """A stream sent nothing for `silence_s` (the shell cancels it: `agent.errors.ProviderSilent`)."""

    def __init__(self, silence_s: float) -> None:
        super().__init__(f"no byte for {silence_s:g} s")
        self.silence_s = silence_s


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as the model sees it: a name, a description and a JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool | None = None
    """The caller's strict-schema flag for the arguments (OpenAI `function.strict`, Anthropic
    `strict`); None: the wire's default."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRequest:
    """One model call. `messages` starts with the system message, if any."""

    model: str
    messages: list[ChatMessage]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    options: CallOptions = field(default_factory=CallOptions)
    """The caller's pass-through options (tool_choice, stop, ...), mapped by each wire."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific request fields, passed through untouched."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderReply:
    """What a model call produced: one assistant message and its usage."""

    message: ChatMessage
    usage: Usage
    stop_reason: StopReason
    model: str
    raw: dict[str, Any] = field(default_factory=dict)
    """Provider-specific extras worth keeping (e.g. a Responses compaction item)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSettings:
    """Everything needed to build a provider client; derived from config in one place."""

    provider: str
    """anthropic | openai | openrouter | custom | openai-codex"""
    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 120.0
    """A plain call's deadline, end to end; for a stream, the limit on connecting and on each
    silence between two reads."""
    stream_deadline_s: float | None = None
    silence_timeout_s: float | None = None
    """A stream without a byte for this long is cancelled and retried once; None: `timeout_s`."""
    """The deadline of one whole streamed attempt, first byte to last (a long answer streams on
    past `timeout_s`); None means `STREAM_DEADLINE_FACTOR` × `timeout_s`."""
    max_retries: int = 3
    api_mode: str = "chat_completions"


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. Implementations translate every SDK error into `agent.errors`."""

    name: str

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        """Run one call (streamed when `on_text` is given) and return the assistant message."""
        ...

    async def aclose(self) -> None:
        """Release the HTTP client."""
        ...
