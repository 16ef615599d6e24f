"""Discord <-> gateway: discord.py messages in, replies out. No routing, commands or agent calls here.

Threads: a message in a thread becomes `ChatRef(chat_id=<parent channel id>, thread_id=<thread id>)`,
so the runner keeps one session per thread while the chat still names the channel it lives in.
Discord threads are channels of their own, so every reply, edit and typing call goes to
`thread_id` when it is set and to `chat_id` otherwise. Guild messages carry
`reply_to_message_id`, so the first reply references the message it answers; DMs do not.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import aiohttp
import discord
import structlog

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.errors import ConfigError, PlatformError, PlatformRateLimited, RecipientGone
from agent.media.outbox import OutboundFile
from gateway.approvals import PendingApprovals
from gateway.commands import CommandSpec
from gateway.platforms.base import ChatRef, Deliver, GroupMode, PlatformName
from gateway.platforms.chunking import split_markdown
from gateway.platforms.discord_approval import ApprovalView, approval_text
from gateway.platforms.discord_buttons import CommandButtons
from gateway.platforms.discord_commands import (
    InteractionReplies,
    build_command_tree,
    inbound_from_interaction,
    interaction_facts,
)
from gateway.platforms.discord_inbound import (
    PLATFORM,
    DiscordMessageFacts,
    facts_from_message,
    inbound_from_message,
    strip_bot_mention,
)
from gateway.platforms.discord_media import download_attachments, upload_file

__all__ = [
    "DiscordAdapter",
    "reconnect_delay_s",
    "DiscordMessageFacts",
    "build_intents",
    "error_for_status",
    "facts_from_message",
    "inbound_from_message",
    "start_error_detail",
    "strip_bot_mention",
]

log = structlog.get_logger(__name__)

MAX_MESSAGE_CHARS = 2000
MIN_EDIT_INTERVAL_S = 1.0
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_REQUEST_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
MAX_RATELIMIT_WAIT_S = 30.0
"""discord.py waits out shorter 429s itself; longer ones surface as PlatformRateLimited."""
RECONNECT_BASE_S = 1.0
RECONNECT_MAX_S = 60.0
"""A gateway that died for good is rebuilt after 1, 2, 4, ... seconds, at most a minute apart."""
GATEWAY_CHAT = "gateway"
"""The `chat_id` of errors that concern the connection rather than one chat."""

_TOKEN_HINT = (
    "Discord rejected the bot token; set gateway.discord.token to the bot's token "
    "(Developer Portal -> your application -> Bot -> Reset Token)"
)
_INTENT_HINT = (
    "Discord refused the Message Content intent; enable 'Message Content Intent' under "
    "Bot -> Privileged Gateway Intents for this application in the Discord developer portal"
)


def build_intents() -> discord.Intents:
    """Default intents plus the privileged message_content one; never members or presences."""
    intents = discord.Intents.default()
    intents.message_content = True
    return intents


def error_for_status(
    status: int, *, chat_id: str, detail: str, retry_after_s: float | None = None
) -> PlatformError:
    """The `PlatformError` kind for a failed Discord HTTP call."""
    if status == 429:
        return PlatformRateLimited(PLATFORM, chat_id, detail, retry_after_s=retry_after_s or 1.0)
    if status in (403, 404):
        return RecipientGone(PLATFORM, chat_id, detail)
    return PlatformError(PLATFORM, chat_id, detail)


def reconnect_delay_s(attempt: int, *, base_s: float, max_s: float) -> float:
    """The wait before reconnect attempt `attempt` (1-based): doubling from `base_s`, capped."""
    return min(base_s * 2.0 ** max(attempt - 1, 0), max_s)


def start_error_detail(exc: BaseException) -> str:
    """What to tell the operator when connecting failed; never contains the token."""
    if isinstance(exc, discord.LoginFailure):
        return _TOKEN_HINT
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return _INTENT_HINT
    if isinstance(exc, discord.ConnectionClosed) and exc.code == 4004:
        return _TOKEN_HINT
    if isinstance(exc, discord.ConnectionClosed):
        return f"the Discord gateway closed the connection (code {exc.code})"
    if isinstance(exc, discord.HTTPException):
        return f"Discord answered HTTP {exc.status} while logging in"
    return f"could not reach Discord ({type(exc).__name__})"


class _ForwardingClient(discord.Client):
    """A discord.Client that hands every message event to one callback."""

    def __init__(
        self, *, on_message: Callable[[discord.Message], Awaitable[None]], **options: Any
    ) -> None:
        super().__init__(**options)
        self._forward = on_message

    async def on_message(self, message: discord.Message) -> None:
        await self._forward(message)


class DiscordAdapter:
    """discord.py behind `PlatformAdapter`: DMs, mentions, configured channels and threads."""

    name: PlatformName = PLATFORM
    max_message_chars: int = MAX_MESSAGE_CHARS
    min_edit_interval_s: float = MIN_EDIT_INTERVAL_S

    def __init__(
        self,
        *,
        token: str,
        channels: Sequence[str] = (),
        group_mode: GroupMode = "mention",
        guild_ready_timeout_s: float = 2.0,
        heartbeat_timeout_s: float = 60.0,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        reconnect_base_s: float = RECONNECT_BASE_S,
        reconnect_max_s: float = RECONNECT_MAX_S,
    ) -> None:
        if not token.strip():
            raise ConfigError("gateway.discord.token is empty", key="gateway.discord.token")
        self._token = token
        self._channels = frozenset(str(channel) for channel in channels)
        self._group_mode: GroupMode = group_mode
        self._start_timeout_s = start_timeout_s
        self._request_timeout_s = request_timeout_s
        self._deliver: Deliver | None = None
        self._approvals = PendingApprovals()
        self._replies = InteractionReplies()
        self._connect_task: asyncio.Task[None] | None = None
        self._is_running = False
        """True between a successful start() and stop(): gateway failures then get logged."""
        self._is_stopping = False
        self._reconnect_backoff = (reconnect_base_s, reconnect_max_s)
        self._reconnect_task: asyncio.Task[None] | None = None
        self.reconnects = 0
        """How many times a dead gateway was rebuilt (the "connected but deaf" guard)."""
        self._client_options: dict[str, Any] = dict(
            intents=build_intents(),
            guild_ready_timeout=guild_ready_timeout_s,
            heartbeat_timeout=heartbeat_timeout_s,
            max_ratelimit_timeout=MAX_RATELIMIT_WAIT_S,
            max_messages=None,
            chunk_guilds_at_startup=False,
            allowed_mentions=discord.AllowedMentions(everyone=False, roles=False, users=False),
        )
        self._client = self._new_client()

    def _new_client(self) -> _ForwardingClient:
        client = _ForwardingClient(on_message=self._on_message, **self._client_options)
        self._tree = build_command_tree(client, self._on_slash_command)
        return client

    # lifecycle ----------------------------------------------------------------------------

    async def start(self, deliver: Deliver) -> None:
        """Log in, connect in a background task, and return once the gateway is READY."""
        if self._connect_task is not None:
            raise RuntimeError("DiscordAdapter.start() called twice")
        self._deliver = deliver
        try:
            async with asyncio.timeout(self._start_timeout_s):
                await self._connect()
        except TimeoutError as exc:
            await self._shutdown()
            detail = f"the Discord gateway was not ready within {self._start_timeout_s:g}s"
            raise PlatformError(PLATFORM, GATEWAY_CHAT, detail) from exc
        except BaseException:
            await self._shutdown()
            raise
        self._is_running = True
        await self._sync_commands()
        user = self._client.user
        log.info(
            "discord_connected",
            bot_user_id=str(user.id) if user else None,
            guilds=len(self._client.guilds),
        )

    async def stop(self) -> None:
        """Close the gateway and the HTTP session; quick even when the connection is dead."""
        self._is_stopping = True
        await self._shutdown()
        log.info("discord_stopped")

    async def _connect(self) -> None:
        try:
            await self._client.login(self._token)
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            raise PlatformError(PLATFORM, GATEWAY_CHAT, start_error_detail(exc)) from exc
        task = asyncio.create_task(self._client.connect(reconnect=True), name="discord-gateway")
        task.add_done_callback(self._on_gateway_done)
        self._connect_task = task
        ready = asyncio.create_task(self._client.wait_until_ready(), name="discord-ready")
        try:
            done, _ = await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if ready in done:
            return
        failure = task.exception()
        detail = (
            start_error_detail(failure) if failure else "the Discord gateway closed before READY"
        )
        raise PlatformError(PLATFORM, GATEWAY_CHAT, detail) from failure

    async def _shutdown(self) -> None:
        reconnect, self._reconnect_task = self._reconnect_task, None
        if reconnect is not None and reconnect is not asyncio.current_task():
            reconnect.cancel()
            await asyncio.wait({reconnect}, timeout=STOP_TIMEOUT_S)
        task, self._connect_task = self._connect_task, None
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self._client.close()
        except TimeoutError:
            log.warning("discord_close_timed_out", timeout_s=STOP_TIMEOUT_S)
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_TIMEOUT_S)

    def _on_gateway_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or not self._is_running or self._is_stopping:
            return
        if task is not self._connect_task:
            return  # an older connection that a reconnect already replaced
        exc = task.exception()
        detail = start_error_detail(exc) if exc else "the gateway task ended"
        log.error(
            "discord_gateway_failed",
            error=type(exc).__name__ if exc else None,
            detail=detail,
        )
        # Never stay connected but deaf: rebuild the client until the gateway is READY again.
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.create_task(self._reconnect(), name="discord-reconnect")

    async def _reconnect(self) -> None:
        base_s, max_s = self._reconnect_backoff
        attempt = 0
        while not self._is_stopping:
            attempt += 1
            delay_s = reconnect_delay_s(attempt, base_s=base_s, max_s=max_s)
            await asyncio.sleep(delay_s)
            old, self._client = self._client, self._new_client()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await old.close()
            try:
                async with asyncio.timeout(self._start_timeout_s):
                    await self._connect()
            except (PlatformError, TimeoutError) as exc:
                log.warning(
                    "discord_reconnect_failed",
                    attempt=attempt,
                    retry_in_s=reconnect_delay_s(attempt + 1, base_s=base_s, max_s=max_s),
                    error=str(exc) or type(exc).__name__,
                )
                continue
            self.reconnects += 1
            log.info("discord_reconnected", attempt=attempt, reconnects=self.reconnects)
            return

    # inbound ------------------------------------------------------------------------------

    async def _on_message(self, message: discord.Message) -> None:
        user = self._client.user
        if user is None or self._deliver is None:
            return
        facts = facts_from_message(message)
        inbound = inbound_from_message(
            facts, bot_user_id=str(user.id), channels=self._channels, group_mode=self._group_mode
        )
        if inbound is None:
            log.debug(
                "discord_message_ignored", channel_id=facts.channel_id, author_id=facts.author_id
            )
            return
        log.info(
            "discord_message_received",
            chat_id=inbound.chat.chat_id,
            thread_id=inbound.chat.thread_id,
            user_id=inbound.user_id,
            is_direct=inbound.is_direct,
            chars=len(inbound.text),
        )
        if message.attachments:
            files = await download_attachments(message.attachments)
            inbound = dataclasses.replace(inbound, files=files)
        try:
            await self._deliver(inbound)
        except Exception:
            log.exception("discord_delivery_failed", chat_id=inbound.chat.chat_id)

    async def _sync_commands(self) -> None:
        """Register the slash commands (a bulk overwrite); a failure is logged, not fatal."""
        try:
            with _map_errors(ChatRef(platform=PLATFORM, chat_id=GATEWAY_CHAT)):
                async with asyncio.timeout(self._request_timeout_s):
                    synced = await self._tree.sync()
        except PlatformError as exc:
            log.warning(
                "discord_commands_not_synced",
                error=str(exc),
                action="Discord refused the slash commands; invite the bot with the "
                "applications.commands scope (Developer Portal -> OAuth2 -> URL Generator)",
            )
            return
        log.info("discord_commands_synced", commands=len(synced))

    async def _on_slash_command(
        self, interaction: discord.Interaction, spec: CommandSpec, argument: str
    ) -> None:
        """Acknowledge at once ("thinking…"), then hand the command to the runner."""
        if self._deliver is None:
            return
        try:
            async with asyncio.timeout(self._request_timeout_s):
                await interaction.response.defer(thinking=True)
        except (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("discord_interaction_not_acknowledged", error=type(exc).__name__)
            return
        key = self._replies.open(interaction, spec.name)
        inbound = inbound_from_interaction(
            interaction_facts(interaction), key=key, spec=spec, argument=argument
        )
        log.info("discord_command_received", command=spec.name, is_direct=inbound.is_direct)
        try:
            await self._deliver(inbound)
        except Exception:
            log.exception("discord_delivery_failed", chat_id=inbound.chat.chat_id)

    # outbound -----------------------------------------------------------------------------

    def render(self, text: str) -> list[str]:
        """The model's markdown as Discord shows it, cut into messages of 2000 characters
        without breaking a code block."""
        return split_markdown(text, limit=MAX_MESSAGE_CHARS)

    async def send(self, chat: ChatRef, text: str) -> str:
        """Post `text` (1..2000 chars) to the chat or its thread; return the new message's id.

        A reply to a slash command is the interaction's response (follow-ups after the first)."""
        _check_length(text)
        if self._replies.owns(chat):
            with _map_errors(chat):
                async with asyncio.timeout(self._request_timeout_s):
                    return await self._replies.send(chat, text)
        channel = self._messageable(chat)
        reference = None
        if chat.reply_to_message_id is not None:
            reference = discord.MessageReference(
                message_id=int(chat.reply_to_message_id),
                channel_id=channel.id,
                fail_if_not_exists=False,
            )
        with _map_errors(chat):
            async with asyncio.timeout(self._request_timeout_s):
                message = await channel.send(text, reference=reference)  # type: ignore[arg-type]
        return str(message.id)

    async def send_file(self, chat: ChatRef, file: OutboundFile) -> str:
        """`file` as an attachment of a new message (`send_file` tool); return its id."""
        with _map_errors(chat):
            message = await upload_file(self._messageable(chat), file)
        return str(message.id)

    async def edit(self, chat: ChatRef, message_id: str, text: str) -> None:
        """Replace the text of a message the bot sent."""
        _check_length(text)
        if self._replies.owns(chat):
            with _map_errors(chat):
                async with asyncio.timeout(self._request_timeout_s):
                    await self._replies.edit(chat, message_id, text)
            return
        partial = self._messageable(chat).get_partial_message(int(message_id))
        with _map_errors(chat):
            async with asyncio.timeout(self._request_timeout_s):
                await partial.edit(content=text)

    async def typing(self, chat: ChatRef) -> None:
        """Show 'typing…' in the chat or thread (Discord keeps it up for about 10 s)."""
        channel = self._messageable(chat)
        with _map_errors(chat):
            async with asyncio.timeout(self._request_timeout_s):
                await channel.typing()

    async def ask_approval(
        self,
        chat: ChatRef,
        request: ApprovalRequest,
        *,
        may_answer: Callable[[str], bool],
        timeout_s: float,
    ) -> ApprovalAnswer:
        """Ask in the chat (or thread) with buttons; silence, or a question too long to show
        whole, is a denial."""
        text = approval_text(request)
        if len(text) > MAX_MESSAGE_CHARS - 200:
            log.warning("approval_too_long", chars=len(text))
            return "deny"
        approval_id = self._approvals.open(may_answer)
        view = ApprovalView(self._approvals, approval_id, text=text, timeout_s=timeout_s)
        channel = self._messageable(chat)
        try:
            with _map_errors(chat):
                async with asyncio.timeout(self._request_timeout_s):
                    sent = await channel.send(text, view=view)
        except PlatformError:
            self._approvals.close(approval_id)
            view.stop()
            log.warning("approval_not_sent", chat_id=chat.chat_id)
            return "deny"
        outcome = await self._approvals.wait(approval_id, timeout_s)
        if outcome.by is None:  # the deadline: nobody pressed, so the buttons are ours to remove
            view.stop()
            with contextlib.suppress(PlatformError):
                with _map_errors(chat):
                    async with asyncio.timeout(self._request_timeout_s):
                        await sent.edit(content=view.settled_text(outcome), view=None)
        return outcome.answer

    async def send_buttons(
        self, chat: ChatRef, text: str, buttons: Sequence[tuple[str, str]]
    ) -> str:
        """Send `text` with command buttons (`discord_buttons`); a press is that command."""
        _check_length(text)
        deliver = self._deliver
        if deliver is None:
            return await self.send(chat, text)
        view = CommandButtons(buttons, deliver)
        with _map_errors(chat):
            async with asyncio.timeout(self._request_timeout_s):
                sent = await self._messageable(chat).send(text, view=view)
        return str(sent.id)

    def _messageable(self, chat: ChatRef) -> discord.PartialMessageable:
        return self._client.get_partial_messageable(int(chat.thread_id or chat.chat_id))


def _check_length(text: str) -> None:
    if not text.strip():
        raise ValueError("Discord messages cannot be empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ValueError(
            f"{len(text)} characters exceed Discord's {MAX_MESSAGE_CHARS}; split first"
        )


def _retry_after_s(exc: discord.HTTPException) -> float | None:
    headers = getattr(exc.response, "headers", None) or {}
    try:
        return float(headers["Retry-After"])
    except (KeyError, ValueError):
        return None


@contextmanager
def _map_errors(chat: ChatRef) -> Iterator[None]:
    """Translate discord.py and transport errors into the `PlatformError` kinds, once."""
    chat_id = chat.thread_id or chat.chat_id
    try:
        yield
    except discord.RateLimited as exc:
        raise PlatformRateLimited(
            PLATFORM, chat_id, str(exc), retry_after_s=exc.retry_after
        ) from exc
    except discord.HTTPException as exc:
        detail = f"HTTP {exc.status} (code {exc.code})"
        raise error_for_status(
            exc.status, chat_id=chat_id, detail=detail, retry_after_s=_retry_after_s(exc)
        ) from exc
    except TimeoutError as exc:
        raise PlatformError(PLATFORM, chat_id, "Discord did not answer in time") from exc
    except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
        raise PlatformError(PLATFORM, chat_id, type(exc).__name__) from exc
