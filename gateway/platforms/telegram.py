"""Telegram <-> gateway through python-telegram-bot: updates in, replies out; no routing here."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import logging
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Literal, TypeAlias, TypeVar, assert_never
from urllib.parse import urlsplit

import structlog
from telegram import (
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from telegram.ext import Application, ApplicationBuilder, BaseUpdateProcessor, TypeHandler
from telegram.warnings import PTBDeprecationWarning

from agent.access import ApprovalAnswer, ApprovalRequest
from agent.errors import ConfigError, PlatformError, PlatformRateLimited, RecipientGone
from agent.media.outbox import OutboundFile
from agent.tools.approval import ANSWER_LABELS, render_request
from gateway.approvals import (
    BUTTONS,
    PRESS_TEXTS,
    ApprovalOutcome,
    PendingApprovals,
    PressResult,
    button_data,
    outcome_line,
    parse_button_data,
)
from gateway.commands import COMMANDS
from gateway.platforms.base import ChatRef, Deliver, GroupMode, PlatformName
from gateway.platforms.chunking import split_html
from gateway.platforms.telegram_buttons import command_keyboard, inbound_from_press
from gateway.platforms.telegram_format import html_to_plain, markdown_to_telegram_html
from gateway.platforms.telegram_inbound import (
    PLATFORM,
    inbound_from_update,
    is_addressed,
    normalise_command,
    strip_bot_mention,
)
from gateway.platforms.telegram_media import (
    DOWNLOAD_DEADLINE_S,
    download_files,
    file_targets,
    upload_file,
)

__all__ = [
    "MAX_MESSAGE_CHARS",
    "TelegramAdapter",
    "approval_keyboard",
    "TelegramMode",
    "bot_urls",
    "command_menu",
    "inbound_from_update",
    "is_addressed",
    "normalise_command",
    "strip_bot_mention",
    "translate_error",
    "webhook_secret",
]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

TelegramMode: TypeAlias = Literal["polling", "webhook"]
MAX_MESSAGE_CHARS = 4096
MIN_EDIT_INTERVAL_S = 1.0
"""Telegram tolerates about one edit per second per chat."""
MAX_CONCURRENT_UPDATES = 256
NO_CHAT = "-"
"""`PlatformError.chat_id` for failures that concern the bot, not one chat."""
TOKEN_REJECTED = "the Bot API rejected the bot token; check gateway.telegram.token"
_URL_LOGGERS = ("httpx", "telegram.Bot", "telegram.ext.ExtBot")
"""Loggers that write request URLs, which contain the bot token."""
_UPDATES = [Update.MESSAGE, Update.EDITED_MESSAGE, Update.CALLBACK_QUERY]
"""Text messages, their edits, and presses of our buttons."""


def approval_keyboard(approval_id: str) -> InlineKeyboardMarkup:
    """ "Allow once / Always for this session / Deny", one button per row."""
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(ANSWER_LABELS[a], callback_data=button_data(approval_id, a))]
         for a in BUTTONS]
    )  # fmt: skip


def command_menu() -> list[BotCommand]:
    """The chat command table as Telegram's command menu (https://core.telegram.org/bots/api#botcommand)."""
    return [BotCommand(spec.name, spec.summary) for spec in COMMANDS]


def webhook_secret(token: str) -> str:
    """The webhook's `secret_token`, derived from the bot token: every worker behind one
    webhook URL registers and checks the same value (Bot API: 1-256 of A-Z a-z 0-9 _ -)."""
    return hmac.new(token.encode(), b"hermes telegram webhook", hashlib.sha256).hexdigest()


def bot_urls(base_url: str) -> tuple[str, str]:
    """PTB's (base_url, base_file_url) from a server root or a '.../bot' prefix."""
    root = base_url.rstrip("/").removesuffix("/bot")
    return f"{root}/bot", f"{root}/file/bot"


def translate_error(
    exc: TelegramError | TimeoutError, chat_id: str, *, is_edit: bool = False
) -> PlatformError | None:
    """The runtime's kind for a PTB error; None when the error means nothing needs doing."""
    match exc:
        case RetryAfter():
            return PlatformRateLimited(
                PLATFORM, chat_id, "flood control", retry_after_s=_retry_after_s(exc)
            )
        case Forbidden():
            return RecipientGone(PLATFORM, chat_id, exc.message)
        case ChatMigrated():
            return RecipientGone(PLATFORM, chat_id, f"chat migrated to {exc.new_chat_id}")
        case BadRequest() if is_edit and "message is not modified" in exc.message.lower():
            return None
        case BadRequest() if "chat not found" in exc.message.lower():
            return RecipientGone(PLATFORM, chat_id, exc.message)
        case InvalidToken():
            return PlatformError(PLATFORM, chat_id, TOKEN_REJECTED)  # PTB's text holds the token
        case TelegramError():
            return PlatformError(PLATFORM, chat_id, exc.message)
        case TimeoutError():
            return PlatformError(PLATFORM, chat_id, "request timed out")
        case unreachable:
            assert_never(unreachable)


class TelegramAdapter:
    """One Telegram bot; satisfies `gateway.platforms.base.PlatformAdapter`."""

    name: PlatformName = PLATFORM
    max_message_chars = MAX_MESSAGE_CHARS
    min_edit_interval_s = MIN_EDIT_INTERVAL_S

    def __init__(
        self,
        *,
        token: str,
        base_url: str | None = None,
        mode: TelegramMode = "polling",
        webhook_url: str | None = None,
        webhook_listen: str = "127.0.0.1",
        webhook_port: int = 8443,
        poll_timeout_s: float = 10.0,
        request_timeout_s: float = 15.0,
        group_mode: GroupMode = "mention",
        group_chats: Mapping[str, GroupMode] | None = None,
    ) -> None:
        _check_settings(token=token, mode=mode, webhook_url=webhook_url)
        self._group_mode: GroupMode = group_mode
        self._group_chats = dict(group_chats or {})
        self._mode: TelegramMode = mode
        self._webhook = (webhook_url or "", webhook_listen, webhook_port)
        self._poll_timeout_s = poll_timeout_s
        self._request_timeout_s = request_timeout_s
        self._secret = webhook_secret(token)
        self._redactor = _TokenRedactor(token)
        self._redactor.attach()  # PTB logs its URLs while the application is built
        self._deliver: Deliver | None = None
        self._approvals = PendingApprovals()
        self._app = _build_application(token, base_url, request_timeout_s)
        self._app.add_handler(TypeHandler(Update, self._on_update))

    @property
    def application(self) -> Application[Any, Any, Any, Any, Any, Any]:
        """The underlying PTB application (for diagnostics and tests)."""
        return self._app

    async def start(self, deliver: Deliver) -> None:
        """Check the token, then poll (or serve the webhook); cleans up if any step fails."""
        self._deliver = deliver
        self._redactor.attach()
        try:
            with _map_errors(NO_CHAT):
                await self._step(self._app.initialize())  # getMe: the token check
                await self._app.start()
                await self._set_command_menu()
                await self._step(self._start_updater())
        except BaseException:
            await self._shutdown()
            raise
        log.info("telegram_started", mode=self._mode, bot=self._app.bot.username)

    async def stop(self) -> None:
        """Stop fetching, confirm fetched updates, let handlers finish, disconnect."""
        await self._shutdown()
        log.info("telegram_stopped")

    def render(self, text: str) -> list[str]:
        """The model's markdown as Telegram HTML, cut into well-formed messages of 4096."""
        return split_html(markdown_to_telegram_html(text), limit=MAX_MESSAGE_CHARS)

    async def send(self, chat: ChatRef, text: str) -> str:
        """Send one Telegram HTML message of at most 4096 characters; return its message id.

        Should Telegram reject the markup ("can't parse entities"), the text goes out plain."""
        _check_text(text)
        reply = None
        if chat.reply_to_message_id is not None:
            reply = ReplyParameters(
                message_id=int(chat.reply_to_message_id), allow_sending_without_reply=True
            )
        target: dict[str, Any] = dict(
            chat_id=_chat_id(chat.chat_id),
            message_thread_id=_thread_id(chat),
            reply_parameters=reply,
        )

        async def send_as(body: str, parse_mode: str | None) -> Message:
            sent: Message = await self._app.bot.send_message(
                text=body, parse_mode=parse_mode, **target
            )
            return sent

        with _map_errors(chat.chat_id):
            message = await self._step(_with_plain_fallback(send_as, text))
        return str(message.message_id)

    async def send_file(self, chat: ChatRef, file: OutboundFile) -> str:
        """A photo or a document with its caption (`send_file` tool); return its message id."""
        with _map_errors(chat.chat_id):
            sent = await upload_file(self._app.bot, _chat_id(chat.chat_id), _thread_id(chat), file)
        return str(sent.message_id)

    async def edit(self, chat: ChatRef, message_id: str, text: str) -> None:
        """Replace a sent message's text (Telegram HTML, plain if rejected); an unchanged text
        is not an error."""
        _check_text(text)
        target: dict[str, Any] = dict(chat_id=_chat_id(chat.chat_id), message_id=int(message_id))

        async def edit_as(body: str, parse_mode: str | None) -> object:
            return await self._app.bot.edit_message_text(text=body, parse_mode=parse_mode, **target)

        with _map_errors(chat.chat_id, is_edit=True):
            await self._step(_with_plain_fallback(edit_as, text))

    async def _set_command_menu(self) -> None:
        """The command menu from the one command table; a failure is logged, not fatal."""
        try:
            with _map_errors(NO_CHAT):
                await self._step(self._app.bot.set_my_commands(command_menu()))
        except PlatformError as exc:
            log.warning("telegram_command_menu_failed", error=str(exc))

    async def typing(self, chat: ChatRef) -> None:
        """Show 'typing…' in the chat (and topic) for about five seconds."""
        with _map_errors(chat.chat_id):
            await self._step(
                self._app.bot.send_chat_action(
                    chat_id=_chat_id(chat.chat_id),
                    action=ChatAction.TYPING,
                    message_thread_id=_thread_id(chat),
                )
            )

    async def ask_approval(
        self,
        chat: ChatRef,
        request: ApprovalRequest,
        *,
        may_answer: Callable[[str], bool],
        timeout_s: float,
    ) -> ApprovalAnswer:
        """Ask in the chat with an inline keyboard; silence, or a question too long to show
        whole, is a denial. The text is plain (no parse mode): the command reads exactly."""
        text = render_request(request)
        if len(text) > MAX_MESSAGE_CHARS - 200:
            log.warning("approval_too_long", chars=len(text))
            return "deny"
        approval_id = self._approvals.open(may_answer)
        try:
            with _map_errors(chat.chat_id):
                sent = await self._step(
                    self._app.bot.send_message(
                        chat_id=_chat_id(chat.chat_id),
                        text=text,
                        message_thread_id=_thread_id(chat),
                        reply_markup=approval_keyboard(approval_id),
                    )
                )
        except PlatformError:
            self._approvals.close(approval_id)
            log.warning("approval_not_sent", chat_id=chat.chat_id)
            return "deny"
        outcome = await self._approvals.wait(approval_id, timeout_s)
        await self._settle(chat, sent.message_id, text, outcome, timeout_s)
        return outcome.answer

    async def _settle(
        self, chat: ChatRef, message_id: int, text: str, outcome: ApprovalOutcome, timeout_s: float
    ) -> None:
        """Take the buttons away and note the outcome under the question."""
        chat_id = _chat_id(chat.chat_id)
        try:
            with _map_errors(chat.chat_id, is_edit=True):
                await self._step(
                    self._app.bot.edit_message_reply_markup(chat_id=chat_id, message_id=message_id)
                )
                await self._step(
                    self._app.bot.edit_message_text(
                        text=f"{text}\n\n{outcome_line(outcome, timeout_s=timeout_s)}",
                        chat_id=chat_id,
                        message_id=message_id,
                    )
                )
        except PlatformError as exc:  # cosmetic: the decision stands
            log.info("approval_settle_failed", error=type(exc).__name__)

    async def _on_button(self, update: Update) -> None:
        query = update.callback_query
        assert query is not None
        parsed = parse_button_data(query.data)
        result: PressResult = "expired"
        if parsed is not None:
            user = query.from_user
            result = self._approvals.press(
                parsed[0], parsed[1], user_id=str(user.id), name=user.username or user.full_name
            )
        log.info("approval_button_pressed", result=result)
        with contextlib.suppress(TelegramError, TimeoutError):
            await self._step(query.answer(text=PRESS_TEXTS[result]))

    async def send_buttons(
        self, chat: ChatRef, text: str, buttons: Sequence[tuple[str, str]]
    ) -> str:
        """Send `text` (Telegram HTML) with command buttons (`telegram_buttons`)."""
        _check_text(text)
        keyboard = command_keyboard(buttons)

        async def send_as(body: str, parse_mode: str | None) -> Message:
            sent: Message = await self._app.bot.send_message(
                chat_id=_chat_id(chat.chat_id), text=body, parse_mode=parse_mode,
                message_thread_id=_thread_id(chat), reply_markup=keyboard,
            )  # fmt: skip
            return sent

        with _map_errors(chat.chat_id):
            return str((await self._step(_with_plain_fallback(send_as, text))).message_id)

    async def _on_update(self, update: Update, _context: object) -> None:
        pressed = inbound_from_press(update)  # a command button: the command, typed
        if update.callback_query is not None and pressed is None:
            await self._on_button(update)
            return
        if pressed is not None and update.callback_query is not None:
            with contextlib.suppress(TelegramError, TimeoutError):
                await self._step(update.callback_query.answer())
        bot = self._app.bot
        inbound = pressed or inbound_from_update(
            update,
            bot.username,
            bot_id=bot.id,
            group_mode=self._group_mode,
            group_chats=self._group_chats,
        )
        if inbound is None or self._deliver is None:
            log.debug("telegram_update_ignored", update_id=update.update_id)
            return
        if update.message is not None and (targets := file_targets(update.message)):
            files = await download_files(self._app.bot, targets, timeout_s=DOWNLOAD_DEADLINE_S)
            inbound = dataclasses.replace(inbound, files=files)
        try:
            await self._deliver(inbound)
        except Exception:  # task root: PTB would otherwise log it without our context
            log.exception(
                "telegram_delivery_failed", update_id=update.update_id, chat_id=inbound.chat.chat_id
            )

    async def _start_updater(self) -> None:
        updater = self._app.updater
        assert updater is not None
        if self._mode == "polling":
            await updater.start_polling(
                timeout=timedelta(seconds=self._poll_timeout_s),
                poll_interval=0.0,
                allowed_updates=_UPDATES,
            )
            return
        url, listen, port = self._webhook
        await updater.start_webhook(
            listen=listen,
            port=port,
            url_path=urlsplit(url).path.lstrip("/"),
            webhook_url=url,
            allowed_updates=_UPDATES,
            secret_token=self._secret,
        )

    async def _step(self, awaitable: Awaitable[_T]) -> _T:
        async with asyncio.timeout(self._request_timeout_s):
            return await awaitable

    async def _shutdown(self) -> None:
        """Undo whatever is running; each step bounded, a failed step does not stop the rest."""
        app, updater = self._app, self._app.updater
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        if updater is not None and updater.running:
            steps.append(("updater_stop", updater.stop))  # confirms fetched updates' offsets
        if app.running:
            steps.append(("application_stop", app.stop))  # handles everything already fetched
        steps += [("application_shutdown", app.shutdown), ("bot_shutdown", app.bot.shutdown)]
        for step_name, step in steps:
            try:
                await self._step(step())
            except Exception as exc:  # cleanup carries on; the error is logged, not lost
                log.warning("telegram_stop_step_failed", step=step_name, error=type(exc).__name__)
        self._redactor.detach()


class _ChatOrderedProcessor(BaseUpdateProcessor):
    """Updates of different chats run concurrently; updates of one chat run in arrival order."""

    __slots__ = ("_locks", "_waiting")

    def __init__(self, max_concurrent_updates: int) -> None:
        super().__init__(max_concurrent_updates)
        self._locks: dict[int, asyncio.Lock] = {}
        self._waiting: dict[int, int] = {}

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        chat = update.effective_chat if isinstance(update, Update) else None
        if chat is None:
            await coroutine
            return
        lock = self._locks.setdefault(chat.id, asyncio.Lock())
        self._waiting[chat.id] = self._waiting.get(chat.id, 0) + 1
        try:
            async with lock:  # FIFO: tasks reach it in the order PTB fetched the updates
                await coroutine
        finally:
            self._waiting[chat.id] -= 1
            if not self._waiting[chat.id]:
                del self._waiting[chat.id], self._locks[chat.id]

    async def initialize(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None


class _TokenRedactor(logging.Filter):
    """Keeps the bot token out of log lines that show request URLs (the token is in every URL)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def attach(self) -> None:
        for name in _URL_LOGGERS:
            logging.getLogger(name).addFilter(self)  # idempotent

    def detach(self) -> None:
        for name in _URL_LOGGERS:
            logging.getLogger(name).removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self._token in text:
            record.msg, record.args = text.replace(self._token, "<token>"), None
        return True


@contextmanager
def _map_errors(chat_id: str, *, is_edit: bool = False) -> Iterator[None]:
    try:
        yield
    except (TelegramError, TimeoutError) as exc:
        error = translate_error(exc, chat_id, is_edit=is_edit)
        if error is None:
            return
        if isinstance(exc, InvalidToken):
            raise error from None  # PTB's message and cause carry the token: cut the chain
        raise error from exc


def _build_application(
    token: str, base_url: str | None, timeout_s: float
) -> Application[Any, Any, Any, Any, Any, Any]:
    builder = (
        ApplicationBuilder()
        .token(token)
        .concurrent_updates(_ChatOrderedProcessor(MAX_CONCURRENT_UPDATES))
        .connect_timeout(timeout_s)
        .read_timeout(timeout_s)
        .write_timeout(timeout_s)
        .pool_timeout(timeout_s)
        .get_updates_connect_timeout(timeout_s)
        .get_updates_read_timeout(timeout_s)  # PTB adds the long-poll timeout to this
        .get_updates_write_timeout(timeout_s)
        .get_updates_pool_timeout(timeout_s)
        .job_queue(None)
    )
    if base_url:
        api_url, file_url = bot_urls(base_url)
        builder = builder.base_url(api_url).base_file_url(file_url)
    return builder.build()


def _check_settings(*, token: str, mode: TelegramMode, webhook_url: str | None) -> None:
    if not token:
        raise ConfigError("gateway.telegram.token is not set", key="gateway.telegram.token")
    if mode == "webhook" and not webhook_url:
        raise ConfigError(
            "gateway.telegram.mode is 'webhook' but gateway.telegram.webhook_url is not set",
            key="gateway.telegram.webhook_url",
        )


def _check_text(text: str) -> None:
    if not text.strip():
        raise ValueError("Telegram refuses empty messages")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ValueError(
            f"message has {len(text)} characters; Telegram allows {MAX_MESSAGE_CHARS} "
            "(split it with gateway.platforms.chunking.split_for_limit)"
        )


async def _with_plain_fallback(call: Callable[[str, str | None], Awaitable[_T]], text: str) -> _T:
    """`call` with the text as HTML; once more as plain text if Telegram rejects an entity."""
    try:
        return await call(text, ParseMode.HTML)
    except BadRequest as exc:
        if "can't parse entities" not in exc.message.lower():
            raise
        log.warning("telegram_markup_rejected", error=exc.message[:200])
        return await call(html_to_plain(text), None)


def _chat_id(chat_id: str) -> int | str:
    """Numeric ids as int; '@channelname' stays a string."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


def _thread_id(chat: ChatRef) -> int | None:
    return int(chat.thread_id) if chat.thread_id is not None else None


def _retry_after_s(exc: RetryAfter) -> float:
    """Seconds to wait; PTB 22 warns that `retry_after` turns from int into timedelta."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
