"""Where a turn's words go: a `ReplySink` per inbound message, streamed to a platform by edits."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from agent.errors import PlatformError, PlatformRateLimited, RecipientGone
from agent.media.outbox import OutboundFile, Outbox
from gateway.platforms.base import ButtonChannel, ChatRef, FileSender, PlatformAdapter

__all__ = ["PlatformReplySink", "ReplySink", "WholeReplySink", "first_preview_ready"]

log = structlog.get_logger(__name__)

STOPPED_MARK = "⏹️ (stopped)"
"""Ends a streamed reply the user stopped (`/stop`, or a new message in `interrupt` mode)."""
FIRST_PREVIEW_WAIT_S = 1.0
"""The first streamed message waits for a sentence end, or this long after the first text:
it is what a phone's notification shows, so never a lone "Hello"."""
FIRST_PREVIEW_MIN_CHARS = 12
_SENTENCE_END = re.compile(r"[.!?…:;。！？](?:\s|$)|\n")
TYPING_EVERY_S = 4.0
"""Platforms show "typing…" for about five seconds per request."""


def first_preview_ready(text: str, waited_s: float) -> bool:
    """Pure: whether the first streamed message may go out: a whole sentence (or line) of some
    length has arrived, or text has been arriving for `FIRST_PREVIEW_WAIT_S`."""
    shown = text.strip()
    if not shown:
        return False
    if waited_s >= FIRST_PREVIEW_WAIT_S:
        return True
    return len(shown) >= FIRST_PREVIEW_MIN_CHARS and _SENTENCE_END.search(shown + " ") is not None


class ReplySink(Protocol):
    """Receives one turn's output. Implementations never raise into the runner."""

    streams: bool
    """Whether `on_text` wants the reply as it is generated (else the model is not streamed)."""

    async def start(self, session_id: str) -> None:
        """The turn of `session_id` begins (show a typing indicator)."""
        ...

    async def on_text(self, delta: str) -> None:
        """A streamed piece of the reply."""
        ...

    async def notice(self, text: str) -> None:
        """A short system note, e.g. that older context was compacted."""
        ...

    async def finish(self, text: str) -> None:
        """The whole reply; after this the user has it."""
        ...


class WholeReplySink:
    """Hears nothing as it happens: the caller takes the reply whole from the outcome (the
    HTTP API's non-streaming answers)."""

    streams = False

    async def start(self, session_id: str) -> None: ...
    async def on_text(self, delta: str) -> None: ...
    async def notice(self, text: str) -> None: ...
    async def finish(self, text: str) -> None: ...


class PlatformReplySink:
    """Streams a reply into a chat: one message edited in place at the platform's rate, then
    the whole reply rendered in the platform's markup and split into messages.

    Edits never come faster than `min_edit_interval_s`; a rate-limited edit (Telegram's 429,
    Discord's) holds every further edit back for the `retry_after` the platform named.
    """

    streams = True

    def __init__(
        self,
        adapter: PlatformAdapter,
        chat: ChatRef,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_recipient_gone: Callable[[], None] | None = None,
        outbox: Outbox | None = None,
    ) -> None:
        self._adapter = adapter
        self._chat = chat
        self._outbox = outbox
        """Files the turn's `send_file` calls queued: sent after the reply's text."""
        self._session_id: str | None = None
        self._clock = clock
        self._on_recipient_gone = on_recipient_gone
        self._gone = False
        """The chat blocked the bot or no longer exists: nothing more is sent to it."""
        self._buffer = ""
        self._message_id: str | None = None
        self._shown = ""
        self._last_edit = 0.0
        self._edits_paused_until = 0.0
        self._typing: asyncio.Task[None] | None = None
        self._first_text_at: float | None = None

    async def start(self, session_id: str) -> None:
        self._session_id = session_id
        self._typing = asyncio.create_task(self._keep_typing(), name="typing")

    async def on_text(self, delta: str) -> None:
        self._buffer += delta
        now = self._clock()
        if self._gone or now < self._edits_paused_until:
            return
        if self._message_id is None:
            if self._first_text_at is None and delta.strip():
                self._first_text_at = now
            waited = now - (self._first_text_at or now)
            if not first_preview_ready(self._buffer, waited):
                return
        if now - self._last_edit < self._adapter.min_edit_interval_s:
            return
        rendered = self._adapter.render(self._buffer)
        preview = rendered[0] if rendered else ""
        if preview and preview != self._shown:
            await self._show(preview)

    async def notice(self, text: str) -> None:
        for piece in self._adapter.render(text):
            await self._safe_send(piece)

    async def notice_with_buttons(self, text: str, buttons: Sequence[tuple[str, str]]) -> None:
        """A note with command buttons under it, where the platform has buttons."""
        pieces = self._adapter.render(text)
        if not isinstance(self._adapter, ButtonChannel) or len(pieces) != 1 or self._gone:
            await self.notice(text)
            return
        try:
            await self._adapter.send_buttons(self._chat, pieces[0], buttons)
        except RecipientGone:
            self._recipient_gone()
        except PlatformError as exc:
            log.warning("reply_buttons_failed", platform=self._chat.platform, error=str(exc))
            await self.notice(text)

    async def finish(self, text: str) -> None:
        await self._stop_typing()
        pieces = self._adapter.render(text or self._buffer) or self._adapter.render("(no reply)")
        first, rest = pieces[0], pieces[1:]
        if self._message_id is None:
            await self._safe_send(first)
        elif first != self._shown:
            await self._safe_edit(self._message_id, first, final=True)
        for piece in rest:
            if self._gone:
                break
            await self._safe_send(piece)
        if self._outbox is not None and self._session_id is not None:
            await self._send_files(self._outbox.take(self._session_id))

    async def _send_files(self, files: list[OutboundFile]) -> None:
        """Each file after the text; one that fails is named in a line, the rest still go."""
        for file in files:
            if self._gone:
                return
            try:
                if not isinstance(self._adapter, FileSender):
                    raise PlatformError(self._adapter.name, self._chat.chat_id, "no files here")
                await self._adapter.send_file(self._chat, file)
            except RecipientGone:
                self._recipient_gone()
            except PlatformError as exc:
                log.warning("file_send_failed", platform=self._adapter.name, kind=file.kind)
                await self._safe_send(f"⚠️ I could not send {file.name}: {exc}")

    async def stopped(self) -> None:
        """The user stopped the turn: what streamed stays, marked stopped; typing ends."""
        if self._buffer.strip():
            await self.finish(f"{self._buffer.rstrip()}\n\n{STOPPED_MARK}")
        else:
            await self._stop_typing()

    async def _show(self, text: str) -> None:
        self._last_edit = self._clock()
        if self._message_id is None:
            self._message_id = await self._safe_send(text)
        else:
            await self._safe_edit(self._message_id, text)
        self._shown = text

    async def _keep_typing(self) -> None:
        while not self._gone:
            try:
                await self._adapter.typing(self._chat)
            except RecipientGone:
                self._recipient_gone()
            except PlatformError:
                pass
            await asyncio.sleep(TYPING_EVERY_S)

    async def _stop_typing(self) -> None:
        if self._typing is not None:
            task = self._typing
            task.cancel()
            # Not `await task` under suppress: that would swallow a cancellation of our caller.
            await asyncio.wait({task})
            self._typing = None
            if not task.cancelled():
                task.result()  # it failed on its own before the cancel: that goes on up

    async def _safe_send(self, text: str) -> str | None:
        for _ in range(3):
            if self._gone:
                return None
            try:
                return await self._adapter.send(self._chat, text)
            except PlatformRateLimited as exc:
                await asyncio.sleep(min(exc.retry_after_s, 30.0))
            except RecipientGone:
                self._recipient_gone()
                return None
            except PlatformError as exc:
                log.warning("reply_send_failed", platform=self._chat.platform, error=str(exc))
                return None
        return None

    async def _safe_edit(self, message_id: str, text: str, *, final: bool = False) -> None:
        """Edit the streamed message. A preview edit that is rate limited pauses the stream's
        edits; the final one waits out the limit (bounded) so the reply is never left half."""
        for _ in range(3 if final else 1):
            if self._gone:
                return
            try:
                await self._adapter.edit(self._chat, message_id, text)
                return
            except RecipientGone:
                self._recipient_gone()
                return
            except PlatformRateLimited as exc:
                self._edits_paused_until = self._clock() + exc.retry_after_s
                log.info("reply_edits_paused", platform=self._chat.platform, s=exc.retry_after_s)
                if final:
                    await asyncio.sleep(min(exc.retry_after_s, 30.0))
            except PlatformError as exc:  # a preview edit is cosmetic; the final one is sent anew
                log.info(
                    "reply_edit_skipped", platform=self._chat.platform, error=type(exc).__name__
                )
                if final:
                    await self._safe_send(text)
                return

    def _recipient_gone(self) -> None:
        if self._gone:
            return
        self._gone = True
        log.info("recipient_gone", platform=self._chat.platform)
        if self._on_recipient_gone is not None:
            self._on_recipient_gone()
