"""FakeTelegram: a loopback Bot API (aiohttp) with real getUpdates offset and long-poll semantics.

Text sent with `parse_mode=HTML` is parsed as Telegram does (`tests.fakes.telegram_rules`): a
bad tag is the real 400 "can't parse entities", and the stored message is what the user reads
(tags gone, entities decoded) with its entities. `setMyCommands` validates as the Bot API does
and `getMyCommands` returns the menu (https://core.telegram.org/bots/api#setmycommands).

Inline keyboards follow https://core.telegram.org/bots/api#inlinekeyboardmarkup: a button has a
`text` and `callback_data` of 1-64 bytes (else `BUTTON_DATA_INVALID`). A press arrives as a
`callback_query` update (https://core.telegram.org/bots/api#callbackquery); the bot answers it
once with `answerCallbackQuery` (text 0-200 characters; an unknown or already answered id is
"query is too old ... or query ID is invalid"), and `editMessageReplyMarkup` without
`reply_markup` removes the keyboard (https://core.telegram.org/bots/api#editmessagereplymarkup;
the same markup again is "message is not modified").

Like the real Bot API, only one `getUpdates` may be in flight: a new one terminates the one
waiting, which gets HTTP 409 "Conflict: terminated by other getUpdates request; make sure that
only one bot instance is running" (python-telegram-bot raises `telegram.error.Conflict`). Several
workers can tell themselves apart by a path prefix (`/<tag>/bot<token>/<method>`, e.g. a reverse
proxy's route), recorded per poll in `poll_consumers`.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import aiohttp
from aiohttp import web

from tests.fakes.telegram_files import FakeBotFiles, media_message
from tests.fakes.telegram_rules import (
    Refused,
    command_problem,
    markup_problem,
    parse_message_text,
    request_params,
)

__all__ = ["FakeTelegram", "InjectedFailure", "SentMessage"]

DEFAULT_TOKEN = "123456:TEST-token-for-fake"
BOT_ID = 123456
CONFLICT = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SentMessage:
    """One sendMessage the fake accepted."""

    chat_id: int
    message_id: int
    text: str
    """What the user reads: with parse_mode HTML, the text without its tags."""
    thread_id: int | None = None
    reply_to_message_id: int | None = None
    parse_mode: str | None = None
    entities: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InjectedFailure:
    """An error the fake returns once, for the next call of `method`."""

    method: str
    status: int
    description: str
    retry_after: int | None = None


@dataclass(slots=True)
class _State:
    updates: list[dict[str, Any]] = field(default_factory=list)
    chats: dict[int, dict[str, Any]] = field(default_factory=dict)
    texts: dict[tuple[int, int], str] = field(default_factory=dict)
    markups: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    open_queries: set[str] = field(default_factory=set)
    commands: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The command menu per scope type (setMyCommands)."""
    blocked: set[int] = field(default_factory=set)
    failures: list[InjectedFailure] = field(default_factory=list)
    webhook_url: str = ""
    webhook_secret: str = ""
    allowed_updates: list[str] | None = None
    """The update types getUpdates was last asked for (None: never said: every type)."""
    pushed: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Every message a person sent, by message_id (what an edit changes)."""


class FakeTelegram:
    """The Bot API methods Hermes uses, served on 127.0.0.1; use as `async with FakeTelegram()`."""

    def __init__(
        self, *, token: str = DEFAULT_TOKEN, bot_username: str = "hermes_test_bot"
    ) -> None:
        self.token = token
        self.bot_username = bot_username
        self.sent: list[SentMessage] = []
        """Every message sent, in order."""
        self.edits: list[tuple[int, int, str]] = []
        """(chat_id, message_id, text) of every accepted edit."""
        self.chat_actions: list[tuple[int, str, int | None]] = []
        self.callback_answers: list[tuple[str, str]] = []
        """(callback_query_id, text) of every answerCallbackQuery."""
        self.markup_edits: list[tuple[int, int, dict[str, Any] | None]] = []
        """(chat_id, message_id, new reply_markup or None) of every editMessageReplyMarkup."""
        """(chat_id, action, thread_id) of every sendChatAction."""
        self.calls: list[str] = []
        """Method names in call order (authorised calls only)."""
        self.requests: list[tuple[str, dict[str, Any]]] = []
        """(method, decoded params) of every authorised call."""
        self.rejected_tokens = 0
        self.poll_consumers: list[str] = []
        """The path tag ("" without one) of every getUpdates, in arrival order."""
        self.conflicts = 0
        """How many waiting getUpdates a newer one terminated (409)."""
        self.files = FakeBotFiles(token)
        """getFile and the file server (`tests.fakes.telegram_files`)."""
        self._poll_generation = 0
        self._state = _State()
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self.last_pushed_id = 0
        """The message_id of the newest `push_text` message."""
        self._changed: asyncio.Condition | None = None
        self._stopping = False
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve on a free loopback port."""
        self._changed = asyncio.Condition()
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_route("*", "/{tag}/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{file_path:.+}", self.files.download)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        """Wake every parked long poll, then close the server."""
        self._stopping = True
        await self._notify()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """The value for PTB's `base_url` (PTB appends token and method)."""
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        """The value for PTB's `base_file_url`."""
        return f"http://127.0.0.1:{self.port}/file/bot"

    # --- test controls ---------------------------------------------------------------------

    async def push_text(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        chat_type: str = "private",
        thread_id: int | None = None,
        username: str = "alice",
        is_bot: bool = False,
        reply_to: int | None = None,
    ) -> int:
        """Queue a new text message from a person; return its update_id. As the Bot API does,
        `@username`s become `mention` entities and a leading `/word` a `bot_command` one
        (offsets in UTF-16 code units); `reply_to` (a message the bot sent in this chat)
        becomes `reply_to_message`."""
        chat = self._chat(chat_id, chat_type, is_forum=thread_id is not None)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": {
                "id": user_id,
                "is_bot": is_bot,
                "first_name": username.title(),
                "username": username,
            },
            "text": text,
        }
        entities = [
            {"type": "mention", "offset": _utf16_len(text[: m.start()]), "length": len(m[0])}
            for m in _USERNAME.finditer(text)
        ]
        if text.startswith("/"):
            command = text.split(maxsplit=1)[0]
            entities.insert(0, {"type": "bot_command", "offset": 0, "length": len(command)})
        if entities:
            message["entities"] = entities
        if reply_to is not None:
            replied = self._state.texts[(chat_id, reply_to)]
            message["reply_to_message"] = self._message_dict(chat_id, reply_to, replied)
        if thread_id is not None:
            message |= {"message_thread_id": thread_id, "is_topic_message": True}
        self._state.pushed[message["message_id"]] = message
        self.last_pushed_id = message["message_id"]
        return await self.push_update({"message": message})

    async def push_edit(self, message_id: int, text: str) -> int:
        """The person edits a message they sent (`push_text`): an `edited_message` update.

        Bot API (core.telegram.org/bots/api#update, #message): `edited_message` is the new
        version of a message, a Message with the same `message_id`, `chat`, `from` and `date`
        as the original, plus `edit_date` (Unix time of the last edit); entities follow the new
        text."""
        original = self._state.pushed[message_id]
        edited = {k: v for k, v in original.items() if k != "entities"}
        edited |= {"text": text, "edit_date": max(int(time.time()), original["date"])}
        if text.startswith("/"):
            command = text.split(maxsplit=1)[0]
            edited["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
        self._state.pushed[message_id] = edited
        return await self.push_update({"edited_message": edited})

    async def push_media(
        self, chat_id: int, user_id: int, caption: str | None = None, **media: Any
    ) -> int:
        """Queue a message carrying `photo=[...]`, `document={...}`, `voice={...}` or
        `audio={...}` (with ids from `files.add`) and an optional caption; return its update_id."""
        chat = self._chat(chat_id, "private", is_forum=False)
        message = media_message(next(self._message_ids), chat, user_id, caption, media)
        return await self.push_update({"message": message})

    async def press_button(
        self,
        chat_id: int,
        message_id: int,
        user_id: int,
        data: str,
        *,
        username: str = "alice",
        stale: bool = False,
    ) -> str:
        """A person presses an inline button of a bot message: queue the `callback_query`.

        `stale`: the press comes from a client that still shows a keyboard already removed."""
        markup = self._state.markups.get((chat_id, message_id))
        buttons = [b for row in (markup or {}).get("inline_keyboard", []) for b in row]
        assert stale or any(b.get("callback_data") == data for b in buttons), "no such button"
        query_id = f"cq{next(self._update_ids)}"
        self._state.open_queries.add(query_id)
        message = self._message_dict(chat_id, message_id, self._state.texts[(chat_id, message_id)])
        message["reply_markup"] = markup
        user = {
            "id": user_id,
            "is_bot": False,
            "first_name": username.title(),
            "username": username,
        }
        await self.push_update(
            {
                "callback_query": {
                    "id": query_id,
                    "from": user,
                    "message": message,
                    "chat_instance": f"ci{chat_id}",
                    "data": data,
                }
            }
        )
        return query_id

    def markup_of(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        """The inline keyboard a message shows now (None once removed)."""
        return self._state.markups.get((chat_id, message_id))

    def text_of(self, chat_id: int, message_id: int) -> str:
        return self._state.texts[(chat_id, message_id)]

    async def push_update(self, body: dict[str, Any]) -> int:
        """Queue a raw update body (e.g. {"edited_message": {...}}); return its update_id."""
        update_id = next(self._update_ids)
        self._state.updates.append({"update_id": update_id} | body)
        await self._notify()
        return update_id

    def fail_next(
        self, method: str, *, status: int, description: str, retry_after: int | None = None
    ) -> None:
        """Make the next call of `method` fail once with this status and description."""
        self._state.failures.append(
            InjectedFailure(
                method=method, status=status, description=description, retry_after=retry_after
            )
        )

    def inject_retry_after(self, seconds: int, *, method: str = "sendMessage") -> None:
        """Make the next `method` call answer 429 with `retry_after` seconds."""
        self.fail_next(
            method,
            status=429,
            description=f"Too Many Requests: retry after {seconds}",
            retry_after=seconds,
        )

    def block(self, chat_id: int) -> None:
        """Behave as if the user of `chat_id` blocked the bot (403 on sends)."""
        self._state.blocked.add(chat_id)

    @property
    def pending_update_ids(self) -> list[int]:
        """Update ids still unconfirmed (not yet acknowledged by a later offset)."""
        return [u["update_id"] for u in self._state.updates]

    @property
    def webhook_url(self) -> str:
        """The URL set by setWebhook, or "" when polling."""
        return self._state.webhook_url

    async def wait_sent(self, n: int, timeout: float = 5.0) -> list[SentMessage]:  # noqa: ASYNC109
        """Wait until at least `n` messages were sent; return all sent so far."""
        await self.wait_for(lambda: len(self.sent) >= n, timeout)
        return list(self.sent)

    async def wait_for(
        self,
        predicate: Callable[[], bool],
        timeout: float = 5.0,  # noqa: ASYNC109 - the name TESTING.md's recipe uses
    ) -> None:
        """Wait until `predicate()` holds after some call reached the fake."""
        assert self._changed is not None, "start the fake first"
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    # --- HTTP ------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            self.rejected_tokens += 1
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params = await request_params(request)
        if method == "getUpdates":
            self.poll_consumers.append(request.match_info.get("tag", ""))
            self._poll_generation += 1
            params["_generation"] = self._poll_generation
            params["_transport"] = request.transport
        self.calls.append(method)
        self.requests.append((method, params))
        await self._notify()  # a parked long poll is observable as soon as it arrives
        try:
            if (failure := self._take_failure(method)) is not None:
                return _error(failure.status, failure.description, retry_after=failure.retry_after)
            handler = _METHODS.get(method)
            if handler is None:
                return _error(404, "Not Found: method not found")
            return await handler(self, params)
        finally:
            await self._notify()

    def _take_failure(self, method: str) -> InjectedFailure | None:
        for i, failure in enumerate(self._state.failures):
            if failure.method == method:
                return self._state.failures.pop(i)
        return None

    async def _get_me(self, _: dict[str, Any]) -> web.Response:
        return _ok(self._bot_user() | {"can_join_groups": True, "supports_inline_queries": False})

    async def _get_updates(self, params: dict[str, Any]) -> web.Response:
        transport = params.pop("_transport", None)

        def request_gone() -> bool:
            return transport is None or transport.is_closing()

        if self._state.webhook_url:
            return _error(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout_s = float(params.get("timeout") or 0)
        mine = params.pop("_generation")
        if params.get("allowed_updates") is not None:  # Bot API: kept until changed again
            self._state.allowed_updates = list(params["allowed_updates"])
        self._confirm(offset)
        assert self._changed is not None

        def superseded() -> bool:
            return self._poll_generation != mine

        try:
            async with asyncio.timeout(timeout_s), self._changed:
                await self._changed.wait_for(
                    lambda: bool(self._state.updates) or self._stopping or superseded()
                )
        except TimeoutError:
            pass
        if superseded():
            if not request_gone():  # a cancelled or dead poller is no conflict worth counting
                self.conflicts += 1
            return _error(409, CONFLICT)
        allowed = self._state.allowed_updates
        if allowed:  # types not asked for are never delivered (an empty list means all)
            self._state.updates = [u for u in self._state.updates if _kind(u) in allowed]
        return _ok(self._state.updates[:limit])

    def _confirm(self, offset: int) -> None:
        """Drop every update below `offset`: Telegram's acknowledgement rule."""
        if offset > 0:
            self._state.updates = [u for u in self._state.updates if u["update_id"] >= offset]

    async def _send_message(self, params: dict[str, Any]) -> web.Response:
        chat_id = int(params["chat_id"])
        if chat_id in self._state.blocked:
            return _error(403, "Forbidden: bot was blocked by the user")
        if chat_id not in self._state.chats:
            return _error(400, "Bad Request: chat not found")
        try:
            parsed = parse_message_text(str(params.get("text", "")), params.get("parse_mode"))
        except Refused as exc:
            return _error(400, str(exc))
        text = parsed.text
        reply = params.get("reply_parameters") or {}
        markup = params.get("reply_markup")
        if markup is not None and (problem := markup_problem(markup)):
            return _error(400, f"Bad Request: {problem}")
        sent = SentMessage(
            chat_id=chat_id,
            message_id=next(self._message_ids),
            text=text,
            thread_id=_opt_int(params.get("message_thread_id")),
            reply_to_message_id=_opt_int(reply.get("message_id")),
            parse_mode=params.get("parse_mode"),
            entities=tuple(parsed.entities),
        )
        self.sent.append(sent)
        self._state.texts[(chat_id, sent.message_id)] = text
        if markup is not None:
            self._state.markups[(chat_id, sent.message_id)] = markup
        return _ok(self._message_dict(chat_id, sent.message_id, text, parsed.entities))

    async def _answer_callback_query(self, params: dict[str, Any]) -> web.Response:
        query_id = str(params.get("callback_query_id", ""))
        text = str(params.get("text") or "")
        if query_id not in self._state.open_queries:
            return _error(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        if len(text) > 200:
            return _error(400, "Bad Request: MESSAGE_TOO_LONG")
        self._state.open_queries.discard(query_id)
        self.callback_answers.append((query_id, text))
        return _ok(True)

    async def _edit_message_reply_markup(self, params: dict[str, Any]) -> web.Response:
        key = (int(params["chat_id"]), int(params["message_id"]))
        if key not in self._state.texts:
            return _error(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup")
        if markup is not None and (problem := markup_problem(markup)):
            return _error(400, f"Bad Request: {problem}")
        if self._state.markups.get(key) == markup:
            return _error(
                400,
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message",
            )
        if markup is None:
            self._state.markups.pop(key, None)
        else:
            self._state.markups[key] = markup
        self.markup_edits.append((key[0], key[1], markup))
        return _ok(self._message_dict(key[0], key[1], self._state.texts[key]))

    async def _edit_message_text(self, params: dict[str, Any]) -> web.Response:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        try:
            parsed = parse_message_text(str(params.get("text", "")), params.get("parse_mode"))
        except Refused as exc:
            return _error(400, str(exc))
        text = parsed.text
        old = self._state.texts.get((chat_id, message_id))
        if old is None:
            return _error(400, "Bad Request: message to edit not found")
        if old == text:
            return _error(
                400,
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message",
            )
        self._state.texts[(chat_id, message_id)] = text
        self.edits.append((chat_id, message_id, text))
        return _ok(self._message_dict(chat_id, message_id, text, parsed.entities))

    async def _set_my_commands(self, params: dict[str, Any]) -> web.Response:
        commands = params.get("commands")
        if (problem := command_problem(commands)) is not None:
            return _error(400, problem)
        self._state.commands[_scope(params)] = list(commands or [])
        return _ok(True)

    async def _get_my_commands(self, params: dict[str, Any]) -> web.Response:
        return _ok(self._state.commands.get(_scope(params), []))

    async def _delete_my_commands(self, params: dict[str, Any]) -> web.Response:
        self._state.commands.pop(_scope(params), None)
        return _ok(True)

    def commands(self, scope: str = "default") -> list[dict[str, Any]]:
        """The command menu set for `scope` (empty until setMyCommands)."""
        return list(self._state.commands.get(scope, []))

    async def _send_chat_action(self, params: dict[str, Any]) -> web.Response:
        chat_id = int(params["chat_id"])
        if chat_id not in self._state.chats:
            return _error(400, "Bad Request: chat not found")
        thread = _opt_int(params.get("message_thread_id"))
        self.chat_actions.append((chat_id, str(params.get("action")), thread))
        return _ok(True)

    async def _delete_webhook(self, params: dict[str, Any]) -> web.Response:
        self._state.webhook_url = ""
        if params.get("drop_pending_updates"):
            self._state.updates.clear()
        return _ok(True)

    async def _set_webhook(self, params: dict[str, Any]) -> web.Response:
        self._state.webhook_url = str(params.get("url", ""))
        self._state.webhook_secret = str(params.get("secret_token") or "")
        return _ok(True)

    async def post_to_webhook(
        self, body: dict[str, Any], *, secret: str | None = None, url: str | None = None
    ) -> int:
        """Deliver an update the way Telegram does once a webhook is set; return the HTTP status.

        `secret` overrides the secret token header (to prove a forged POST is refused); `url`
        sends it elsewhere than the registered URL (a reverse proxy picking another worker).
        """
        update_id = next(self._update_ids)
        token = self._state.webhook_secret if secret is None else secret
        headers = {"X-Telegram-Bot-Api-Secret-Token": token} if token else {}
        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async with http.post(
                url or self._state.webhook_url,
                json={"update_id": update_id} | body,
                headers=headers,
            ) as response:
                return response.status

    # --- payloads --------------------------------------------------------------------------

    def _bot_user(self) -> dict[str, Any]:
        return {"id": BOT_ID, "is_bot": True, "first_name": "Hermes", "username": self.bot_username}

    def _chat(self, chat_id: int, chat_type: str, *, is_forum: bool) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type != "private":
            chat["title"] = f"chat {chat_id}"
        if is_forum:
            chat["is_forum"] = True
        self._state.chats.setdefault(chat_id, chat)
        return self._state.chats[chat_id]

    def _message_dict(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        entities: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        message = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": self._state.chats[chat_id],
            "from": self._bot_user(),
            "text": text,
        }
        if entities:
            message["entities"] = entities
        return message

    async def _notify(self) -> None:
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()


_METHODS = {
    "getMe": FakeTelegram._get_me,
    "getFile": lambda fake, params: fake.files.get_file(params),
    "sendPhoto": lambda fake, params: fake.files.receive(fake, "photo", params),
    "sendDocument": lambda fake, params: fake.files.receive(fake, "document", params),
    "getUpdates": FakeTelegram._get_updates,
    "sendMessage": FakeTelegram._send_message,
    "editMessageText": FakeTelegram._edit_message_text,
    "sendChatAction": FakeTelegram._send_chat_action,
    "answerCallbackQuery": FakeTelegram._answer_callback_query,
    "editMessageReplyMarkup": FakeTelegram._edit_message_reply_markup,
    "deleteWebhook": FakeTelegram._delete_webhook,
    "setWebhook": FakeTelegram._set_webhook,
    "setMyCommands": FakeTelegram._set_my_commands,
    "getMyCommands": FakeTelegram._get_my_commands,
    "deleteMyCommands": FakeTelegram._delete_my_commands,
}


def _kind(update: dict[str, Any]) -> str:
    """An update's type: its one field besides `update_id`."""
    return next(k for k in update if k != "update_id")


def _scope(params: dict[str, Any]) -> str:
    scope = params.get("scope")
    return str(scope.get("type", "default")) if isinstance(scope, dict) else "default"


_USERNAME = re.compile(r"(?<![\w@])@[A-Za-z][A-Za-z0-9_]{3,31}\b")
"""A Telegram username mention (5-32 characters of letters, digits and underscores)."""


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str, *, retry_after: int | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)
