"""An in-process scripted `Provider` for tests: replies in order, logs requests, checks the script.

Script items, consumed one per `complete()` call:

- a `str`: an assistant reply with that text (stop reason "end");
- a `ProviderReply`: returned as is;
- an exception instance: raised;
- a callable `(request) -> str | ProviderReply` (sync or async): called, its result used.

When the script is empty, `responder` (same kinds of return value) answers; without one, the
call fails the test with an AssertionError that says which call was unexpected.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from agent.messages import assistant_message
from agent.providers.base import OnText, ProviderReply, ProviderRequest, StopReason, Usage

__all__ = ["FakeProvider", "ScriptItem", "make_reply"]

Responder: TypeAlias = Callable[
    [ProviderRequest], "str | ProviderReply | Awaitable[str | ProviderReply]"
]
ScriptItem: TypeAlias = "str | ProviderReply | BaseException | Responder"


def make_reply(
    text: str | None,
    *,
    stop_reason: StopReason = "end",
    usage: Usage | None = None,
    model: str = "fake-model",
) -> ProviderReply:
    """A reply whose usage, when not given, counts chars/4 of the text as output."""
    return ProviderReply(
        message=assistant_message(text),
        usage=usage or Usage(input_tokens=10, output_tokens=max(1, len(text or "") // 4)),
        stop_reason=stop_reason,
        model=model,
    )


class FakeProvider:
    """Implements `agent.providers.base.Provider` without any I/O."""

    name = "fake"

    def __init__(self, *, responder: Responder | None = None) -> None:
        self._script: deque[Any] = deque()
        self.responder = responder
        self.requests: list[ProviderRequest] = []
        self.closed = False

    def script(self, *items: ScriptItem) -> FakeProvider:
        """Queue replies, errors or callables for the next calls, in order."""
        self._script.extend(items)
        return self

    @property
    def pending(self) -> int:
        return len(self._script)

    async def complete(
        self, request: ProviderRequest, *, on_text: OnText | None = None
    ) -> ProviderReply:
        self.requests.append(request)
        if self._script:
            item = self._script.popleft()
        elif self.responder is not None:
            item = self.responder
        else:
            raise AssertionError(
                f"FakeProvider: unexpected call #{len(self.requests)} (script empty)"
            )
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, ProviderReply):
            item = item(request)
            if inspect.isawaitable(item):
                item = await item
        reply = make_reply(item, model=request.model) if isinstance(item, str) else item
        if on_text is not None and isinstance(reply.message.get("content"), str):
            await on_text(reply.message["content"])  # type: ignore[arg-type]
        return reply

    def assert_complete(self) -> None:
        """Fail if scripted items were never consumed."""
        assert not self._script, f"FakeProvider: {len(self._script)} scripted item(s) never used"

    async def aclose(self) -> None:
        self.closed = True
