"""The one exception tree of the runtime; every kind carries what its handler needs.

```
HermesError
├── ConfigError              mistake in config or code: fail at start-up
├── ProviderError            .provider, .model
│   ├── ProviderUnavailable  network, timeout, 5xx, overload: back off and retry
│   │   ├── ReplyCut         the reply ended unfinished or is unreadable: retry once (.partial)
│   │   └── ProviderSilent   a stream went silent: cancelled (connection closed), retried once
│   ├── RateLimited          retry after .retry_after_s
│   ├── ProviderAuthError    stop; tell the operator which key to set
│   │   └── MissingApiKey    no key at all: nothing was sent
│   ├── ContextTooLong       compact, then retry once
│   └── BadRequest           the request itself is wrong: do not retry
├── StoreError               the session store refused or failed; nothing half-written
│   ├── InvalidRecord        the input does not fit (too long): refuse it, do not retry
│   ├── StoreUnavailable     unreachable or overloaded: retry later (.retry_after_s)
│   │   └── StoreFull        the disk is full: resumes once space is freed
│   ├── StoreCorrupt         the file is damaged: writes stop, recover it
│   ├── ConcurrentModification   another writer changed the session meanwhile
│   └── SessionBusy          another worker holds the session's turn lock
├── PlatformError            .platform, .chat_id
│   ├── PlatformRateLimited  retry after .retry_after_s
│   └── RecipientGone        drop the route
├── ToolError                goes back to the model as the tool result
├── CompactionRefused        .reason; transcript untouched; back off
├── TurnLimitReached         end the turn with a notice
├── MessageTooLong           refused at the door (.chars, .limit): nothing stored
├── TurnRefused              the caller's new messages do not fit the session (.index): nothing stored
└── MediaRefused             a file that cannot be taken (too big, unknown type): one sentence, nothing stored
```
"""

from __future__ import annotations

from state.store_errors import (
    ConcurrentModification,
    HermesError,
    InvalidRecord,
    SessionBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreUnavailable,
)

__all__ = [
    "BadRequest",
    "MediaRefused",
    "CompactionRefused",
    "ConcurrentModification",
    "ConfigError",
    "ContextTooLong",
    "HermesError",
    "InvalidRecord",
    "MessageTooLong",
    "MissingApiKey",
    "PlatformError",
    "PlatformRateLimited",
    "ProviderAuthError",
    "ProviderError",
    "ProviderSilent",
    "ProviderUnavailable",
    "RateLimited",
    "ReplyCut",
    "RecipientGone",
    "SessionBusy",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreUnavailable",
    "ToolError",
    "TurnLimitReached",
    "TurnRefused",
]


class ConfigError(HermesError):
    """A mistake in configuration: names the key, the value and the file where known."""

    def __init__(self, message: str, *, key: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.path = path


class ProviderError(HermesError):
    """A model provider failed; `provider` and `model` say which."""

    hint = "check the provider's status and your configuration"

    def __init__(self, provider: str, model: str, detail: str = "") -> None:
        self.provider = provider
        self.model = model
        self.detail = detail
        super().__init__(self._describe())

    def _describe(self) -> str:
        what = f"{self.provider} ({self.model})"
        detail = f": {self.detail}" if self.detail else ""
        return f"{type(self).__name__} from {what}{detail} — {self.hint}"


class ProviderUnavailable(ProviderError):
    """Network error, timeout, 5xx or overload: transient, retry with backoff."""

    hint = "the endpoint is unreachable or overloaded; check model.base_url and try again"

    def __init__(
        self, provider: str, model: str, detail: str = "", *, retry_after_s: float | None = None
    ) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(provider, model, detail)


class ReplyCut(ProviderUnavailable):
    """The reply is not a finished one: a stream that ended without a finish reason, or a body
    that is not a valid response. Retried once; then the turn fails keeping what arrived
    (`partial`) under a failure mark, never stored as a complete answer."""

    hint = "the model's reply was cut off or unreadable; try again"

    def __init__(self, provider: str, model: str, detail: str = "", *, partial: str = "") -> None:
        self.partial = partial
        super().__init__(provider, model, detail)


class ProviderSilent(ProviderUnavailable):
    """A streamed reply sent nothing for the silence limit (a stuck server, or a prefill slower
    than the limit allows). The request was cancelled by closing its connection, so a local
    server stops computing it before the one retry is queued."""

    hint = "the model server went silent; raise model.silence_timeout_s for a slow local server"


class RateLimited(ProviderError):
    """429: retry after `retry_after_s`."""

    hint = "rate limited; wait and retry"

    def __init__(
        self, provider: str, model: str, detail: str = "", *, retry_after_s: float | None = None
    ) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(provider, model, detail)


class ProviderAuthError(ProviderError):
    """401/403 or no key at all: stop and tell the operator what to set."""

    hint = "set model.api_key in config.yaml or the provider's API key environment variable"


class MissingApiKey(ProviderAuthError):
    """No key is configured anywhere; `detail` is the whole sentence of what to do."""

    def _describe(self) -> str:
        return self.detail


class ContextTooLong(ProviderError):
    """400/413 because the prompt exceeds the window: compact, then retry once.

    `window_tokens` and `prompt_tokens` are what the server said, when it said them: the window
    it enforces and the prompt as it counted it.
    """

    hint = "the conversation is longer than the model's window; compact it (/compress)"

    def __init__(
        self,
        provider: str,
        model: str,
        detail: str = "",
        *,
        window_tokens: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        self.window_tokens = window_tokens
        self.prompt_tokens = prompt_tokens
        super().__init__(provider, model, detail)


class BadRequest(ProviderError):
    """The provider rejected the request as malformed: retrying will not help."""

    hint = "the provider rejected the request; check model.default and the request options"


class PlatformError(HermesError):
    """A chat platform failed; `platform` and `chat_id` say where."""

    def __init__(self, platform: str, chat_id: str, detail: str = "") -> None:
        self.platform = platform
        self.chat_id = chat_id
        super().__init__(
            f"{platform} chat {chat_id}: {detail}" if detail else f"{platform} chat {chat_id}"
        )


class PlatformRateLimited(PlatformError):
    """The platform asked us to slow down for `retry_after_s`."""

    def __init__(
        self, platform: str, chat_id: str, detail: str = "", *, retry_after_s: float = 1.0
    ) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(platform, chat_id, detail)


class RecipientGone(PlatformError):
    """The chat no longer exists or blocked the bot."""


class ToolError(HermesError):
    """A tool failed; the message goes back to the model as the tool result."""


class CompactionRefused(HermesError):
    """A compaction could not help; the transcript is untouched. `reason` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class TurnLimitReached(HermesError):
    """The turn used its whole iteration budget without a final answer."""

    def __init__(self, session_id: str, *, steps: int) -> None:
        self.session_id = session_id
        self.steps = steps
        super().__init__(f"turn in session {session_id} stopped after {steps} model calls")


class MessageTooLong(HermesError):
    """A message over the gateway's limit, or too big for the model's window: refused before
    anything is stored (HTTP 413)."""

    def __init__(self, chars: int, limit: int, *, why: str) -> None:
        self.chars, self.limit = chars, limit
        super().__init__(
            f"that message is {chars:,} characters; {why} allows {limit:,}. "
            "Send it in parts, or attach it as a file the assistant can read"
        )


class TurnRefused(HermesError):
    """The caller's new messages cannot continue the session as sent (e.g. a tool result for a
    call nobody made); the turn did not start and nothing was stored. `index` is the position
    of the message at fault among the new messages and `field` its key, so the HTTP API's 400
    can name it (`messages[3].tool_call_id`)."""

    def __init__(self, message: str, *, index: int | None = None, field: str | None = None) -> None:
        self.index, self.field = index, field
        super().__init__(message)


class MediaRefused(HermesError):
    """A photo, voice note or file that cannot be taken (over a size limit, a type nobody can
    read, a download that failed): the message is answered with this one sentence, nothing is
    stored, and the session takes the next message as if it had not come. `status` is the HTTP
    status the API answers with (413 too large, 400 otherwise)."""

    def __init__(self, sentence: str, *, status: int = 400) -> None:
        self.status = status
        super().__init__(sentence)
