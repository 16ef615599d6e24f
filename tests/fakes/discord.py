"""A loopback fake of Discord's REST API and gateway, strict enough to drive the real discord.py.

Message components follow https://discord.com/developers/docs/components/reference: at most 5
action rows (type 1) of at most 5 buttons (type 2); a non-link button has a style of 1-4, a
`custom_id` of 1-100 characters and a label of at most 80. A press is an `INTERACTION_CREATE`
of type 3 (MESSAGE_COMPONENT, https://discord.com/developers/docs/interactions/receiving-and-
responding#interaction-object); the app answers it once with
`POST /interactions/{id}/{token}/callback` (no bot token: the interaction token authenticates),
type 7 UPDATE_MESSAGE edits the message the button sits on, type 4 with flag 64 is an ephemeral
reply; a second answer is error 40060 "Interaction has already been acknowledged.".
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import discord.gateway
import discord.http
import pytest
import pytest_asyncio
import yarl
from aiohttp import WSMsgType, web

from tests.fakes.discord_interactions import (
    command_problem,
    interaction_callback,
    interaction_payload,
    registered_commands,
    webhook_response,
)
from tests.fakes.discord_payloads import (
    TIMESTAMP,
    components_problem,
    content_problem,
    guild_payload,
    invalid_form,
    json_response,
)

__all__ = ["FakeDiscord", "RestCall", "patch_discord"]

API_PREFIX = "/api/v10"
MESSAGE_CONTENT_INTENT = 1 << 15
UPLOAD_LIMIT = 10 * 1024 * 1024
"""A bot's upload limit in a server without boosts (all files of one message)."""
PRIVILEGED_INTENTS = (1 << 1) | (1 << 8) | MESSAGE_CONTENT_INTENT  # members, presences, content
_MENTION = re.compile(r"<@!?(\d+)>")


@dataclass(frozen=True, slots=True, kw_only=True)
class RestCall:
    """One REST request the client made: method, path below /api/v10, and its JSON body."""

    method: str
    path: str
    body: Any


@dataclass(slots=True, kw_only=True)
class _Connection:
    ws: web.WebSocketResponse
    number: int
    is_acking: bool = True
    session_id: str | None = None


class FakeDiscord:
    """Discord REST + gateway on 127.0.0.1 with one guild, two text channels, a thread and a DM."""

    def __init__(self, *, token: str = "fake-bot-token", heartbeat_interval_ms: int = 50) -> None:
        self.token = token
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.enabled_intents = MESSAGE_CONTENT_INTENT
        """Privileged intents switched on in the 'developer portal'; others are refused with 4014."""
        self.is_answering_identify = True
        """False makes the gateway swallow IDENTIFY, so READY never comes."""
        ids = itertools.count(900_000_000_000_000_001)
        self.bot_id, self.app_id, self.owner_id, self.human_id, self.other_bot_id = (
            next(ids) for _ in range(5)
        )
        self.guild_id, self.general_id, self.random_id, self.thread_id, self.dm_id = (
            next(ids) for _ in range(5)
        )
        self._message_ids = itertools.count(910_000_000_000_000_001)
        self._seq = itertools.count(1)
        self.connections = 0
        self.max_open_connections = 0
        """The most gateway connections ever open at once (one bot: should stay 1)."""
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.rest_calls: list[RestCall] = []
        self.messages: dict[int, dict[str, Any]] = {}
        """Every message in the fake, by id: users' and the bot's."""
        self.interactions: dict[int, dict[str, Any]] = {}
        """Component interactions sent to the bot, by id, with how they were answered."""
        self.ephemeral_replies: list[tuple[int, str]] = []
        """(interaction id, content) of every ephemeral interaction reply."""
        self.app_commands: list[dict[str, Any]] = []
        """The global application commands, as the last bulk overwrite left them."""
        self._interaction_ids = itertools.count(920_000_000_000_000_001)
        self._sessions: dict[str, int] = {}  # session id -> intents
        self._live: _Connection | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._rest_failures: list[tuple[int, dict[str, Any], dict[str, str]]] = []
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.cdn_files: dict[str, bytes] = {}
        """Attachment bytes by CDN path; `cdn_downloads` lists every path served."""
        self.cdn_downloads: list[str] = []
        self.uploads: list[tuple[int, str, bytes, str]] = []
        """(channel id, file name, bytes, message content) of every file the bot posted."""

    # lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind 127.0.0.1 on a free port and serve."""
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/gateway/", self._gateway)
        app.router.add_route("*", API_PREFIX + "/{tail:.*}", self._rest)
        app.router.add_get("/attachments/{tail:.+}", self._cdn)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Close every gateway socket, then the server."""
        for ws in list(self._sockets):
            await ws.close(code=1001)
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def open_connections(self) -> int:
        """Gateway connections open right now."""
        return len(self._sockets)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway/"

    # scripting ----------------------------------------------------------------------------

    def fail_next_rest(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        """Answer the next REST call (other than login) with this error."""
        self._rest_failures.append((status, body, headers or {}))

    def stop_acking(self) -> None:
        """Make the live connection a zombie: heartbeats are read but never answered."""
        assert self._live is not None, "no live gateway connection"
        self._live.is_acking = False

    async def drop_connection(self, code: int = 4000) -> None:
        """Close the live gateway socket with `code` (4000 is resumable)."""
        assert self._live is not None, "no live gateway connection"
        await self._live.ws.close(code=code)

    async def user_says(
        self,
        content: str,
        *,
        channel_id: int,
        author_id: int | None = None,
        is_bot_author: bool = False,
        reply_to: int | None = None,
        attachments: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """Dispatch MESSAGE_CREATE on the live connection, as Discord would show it to the bot.
        `reply_to` (a message id) makes it a reply (type 19, `message_reference` and the
        resolved `referenced_message`), without pinging the replied-to author; `attachments`
        come from `attachment()`."""
        conn = self._live
        assert conn is not None and conn.session_id is not None, "no identified connection"
        author = self._user(author_id or self.human_id, is_bot=is_bot_author)
        payload = self._message(channel_id=channel_id, author=author, content=content)
        if reply_to is not None:
            replied = self.messages[reply_to]
            reference = {"message_id": replied["id"], "channel_id": replied["channel_id"]}
            if "guild_id" in payload:
                reference["guild_id"] = payload["guild_id"]
            payload |= {
                "type": 19,
                "message_reference": reference,
                "referenced_message": replied,
            }
        payload["attachments"] = list(attachments)
        self.messages[int(payload["id"])] = payload
        intents = self._sessions[conn.session_id]
        await self._dispatch(conn, "MESSAGE_CREATE", self._as_seen(payload, intents))
        return payload

    def attachment(
        self,
        data: bytes | None,
        filename: str,
        content_type: str,
        *,
        size: int | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """An Attachment object (Discord API, "Attachment Object": id, filename, size, url,
        proxy_url, content_type; width/height for images; flags 1<<13 for a voice message) whose
        bytes this fake's CDN serves; `data=None` announces `size` bytes it never serves."""
        attachment_id = next(self._message_ids)
        path = f"{self.dm_id}/{attachment_id}/{filename}"
        if data is not None:
            self.cdn_files[path] = data
        url = f"http://127.0.0.1:{self.port}/attachments/{path}"
        return {
            "id": str(attachment_id),
            "filename": filename,
            "size": len(data) if data is not None else int(size or 0),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
            **extra,
        }

    async def _cdn(self, request: web.Request) -> web.Response:
        path = request.match_info["tail"]
        if path not in self.cdn_files:
            return web.Response(status=404, text="Not Found")
        self.cdn_downloads.append(path)
        return web.Response(body=self.cdn_files[path], content_type="application/octet-stream")

    async def press_button(self, message_id: int, custom_id: str, *, user_id: int) -> int:
        """A person presses a button of a bot message: dispatch the component interaction."""
        conn = self._live
        assert conn is not None and conn.session_id is not None, "no identified connection"
        message = self.messages[message_id]
        buttons = [c for row in message.get("components", []) for c in row["components"]]
        assert any(b.get("custom_id") == custom_id for b in buttons), "no such button"
        interaction_id = next(self._interaction_ids)
        payload = interaction_payload(
            self,
            interaction_id=interaction_id,
            kind=3,
            data={"custom_id": custom_id, "component_type": 2},
            channel_id=int(message["channel_id"]),
            user_id=user_id,
            message=message,
        )
        self.interactions[interaction_id] = {
            "token": payload["token"], "message_id": message_id, "type": None, "kind": 3,
        }  # fmt: skip
        await self._dispatch(conn, "INTERACTION_CREATE", payload)
        return interaction_id

    async def invoke_command(
        self,
        name: str,
        *,
        channel_id: int,
        user_id: int,
        options: dict[str, str] | None = None,
    ) -> int:
        """A person runs a registered slash command: dispatch the APPLICATION_COMMAND
        interaction (type 2) with its string options; return the interaction id."""
        conn = self._live
        assert conn is not None and conn.session_id is not None, "no identified connection"
        command = next((c for c in self.app_commands if c["name"] == name), None)
        assert command is not None, f"/{name} is not registered"
        interaction_id = next(self._interaction_ids)
        data = {
            "id": command["id"],
            "name": name,
            "type": 1,
            "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()],
        }
        payload = interaction_payload(
            self,
            interaction_id=interaction_id,
            kind=2,
            data=data,
            channel_id=channel_id,
            user_id=user_id,
        )
        self.interactions[interaction_id] = {
            "token": payload["token"], "message_id": None, "type": None, "kind": 2,
            "channel_id": channel_id, "followups": [],
        }  # fmt: skip
        await self._dispatch(conn, "INTERACTION_CREATE", payload)
        return interaction_id

    # waiting ------------------------------------------------------------------------------

    async def wait_for(
        self, predicate: Callable[[], bool], *, what: str, timeout_s: float = 5.0
    ) -> None:
        """Wait until `predicate()` holds; fail the test naming `what` if it does not in time."""
        try:
            async with asyncio.timeout(timeout_s), self._changed:
                await self._changed.wait_for(predicate)
        except TimeoutError:
            raise AssertionError(
                f"timed out waiting for {what}: connections={self.connections} "
                f"identifies={len(self.identifies)} resumes={len(self.resumes)} "
                f"rest={[(c.method, c.path) for c in self.rest_calls]}"
            ) from None

    async def wait_resumed(self, count: int = 1, *, timeout_s: float = 5.0) -> None:
        """Wait until `count` RESUMEs were answered with RESUMED."""
        await self.wait_for(
            lambda: len(self.resumes) >= count, what=f"{count} resume(s)", timeout_s=timeout_s
        )

    async def wait_rest_call(self, method: str, path: str, *, timeout_s: float = 5.0) -> RestCall:
        """Wait for a REST call with this method and path; return the first one."""

        def matching() -> list[RestCall]:
            return [c for c in self.rest_calls if c.method == method and c.path == path]

        await self.wait_for(lambda: bool(matching()), what=f"{method} {path}", timeout_s=timeout_s)
        return matching()[0]

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # gateway ------------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        conn = _Connection(ws=ws, number=self.connections)
        self._sockets.add(ws)
        self.max_open_connections = max(self.max_open_connections, len(self._sockets))
        await self._notify()
        try:
            await ws.send_json(
                {
                    "op": 10,
                    "d": {"heartbeat_interval": self.heartbeat_interval_ms},
                    "s": None,
                    "t": None,
                }
            )
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    await self._on_frame(conn, json.loads(msg.data))
        finally:
            self._sockets.discard(ws)
            if self._live is conn:
                self._live = None
            await self._notify()
        return ws

    async def _on_frame(self, conn: _Connection, frame: dict[str, Any]) -> None:
        op, data = frame["op"], frame.get("d") or {}
        if op == 1:
            self.heartbeats += 1
            if conn.is_acking:
                await conn.ws.send_json({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            await self._identify(conn, data)
        elif op == 6:
            await self._resume(conn, data)
        elif op != 3:  # presence updates are accepted and ignored
            await conn.ws.close(code=4001, message=b"Unknown opcode.")
        await self._notify()

    async def _identify(self, conn: _Connection, data: dict[str, Any]) -> None:
        assert {"token", "properties", "intents"} <= data.keys(), f"bad IDENTIFY: {sorted(data)}"
        if not self.is_answering_identify:
            return
        if data["token"] != self.token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        intents = int(data["intents"])
        if intents & PRIVILEGED_INTENTS & ~self.enabled_intents:
            await conn.ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        self.identifies.append(data)
        conn.session_id = f"session-{len(self.identifies)}"
        self._sessions[conn.session_id] = intents
        self._live = conn
        ready = {
            "v": 10,
            "user": self._user(self.bot_id, is_bot=True),
            "guilds": [{"id": str(self.guild_id), "unavailable": True}],
            "session_id": conn.session_id,
            "resume_gateway_url": self.gateway_url,
            "shard": [0, 1],
            "application": {"id": str(self.app_id), "flags": 0},
            "private_channels": [],
            "relationships": [],
            "user_settings": {},
            "presences": [],
            "geo_ordered_rtc_regions": [],
            "guild_join_requests": [],
        }
        await self._dispatch(conn, "READY", ready)
        await self._dispatch(conn, "GUILD_CREATE", self._guild())

    async def _resume(self, conn: _Connection, data: dict[str, Any]) -> None:
        assert {"token", "session_id", "seq"} <= data.keys(), f"bad RESUME: {sorted(data)}"
        if data["token"] != self.token or data["session_id"] not in self._sessions:
            await conn.ws.send_json({"op": 9, "d": False, "s": None, "t": None})
            return
        conn.session_id = data["session_id"]
        self._live = conn
        self.resumes.append(data)
        await self._dispatch(conn, "RESUMED", {})

    async def _dispatch(self, conn: _Connection, event: str, data: dict[str, Any]) -> None:
        await conn.ws.send_json({"op": 0, "t": event, "s": next(self._seq), "d": data})

    def _as_seen(self, message: dict[str, Any], intents: int) -> dict[str, Any]:
        """Discord blanks guild message content for bots without the intent, unless mentioned."""
        mentioned = any(int(u["id"]) == self.bot_id for u in message["mentions"])
        if intents & MESSAGE_CONTENT_INTENT or "guild_id" not in message or mentioned:
            return message
        return {**message, "content": "", "embeds": [], "attachments": [], "components": []}

    # REST ---------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        if request.content_type == "multipart/form-data":  # a message with files[n] uploads
            form = await request.post()
            body = json.loads(str(form.get("payload_json") or "{}"))
            body["_files"] = [
                (v.filename, v.file.read())
                for k, v in form.items()
                if k.startswith("files[") and isinstance(v, web.FileField)
            ]
        else:
            body = await request.json() if request.can_read_body else None
        self.rest_calls.append(RestCall(method=request.method, path=path, body=body))
        await self._notify()
        if path.startswith("/interactions/"):
            return self._interaction_callback(path, body, with_response=bool(request.query))
        if path.startswith("/webhooks/"):
            return webhook_response(self, request.method, path, body)
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return json_response({"message": "401: Unauthorized", "code": 0}, status=401)
        is_login = path in ("/users/@me", "/oauth2/applications/@me")
        if self._rest_failures and not is_login:
            status, error, headers = self._rest_failures.pop(0)
            return json_response(error, status=status, headers=headers)
        return self._route(request.method, path, body)

    def _route(self, method: str, path: str, body: Any) -> web.Response:
        parts = path.strip("/").split("/")
        match method, parts:
            case "GET", ["users", "@me"]:
                return json_response(self._user(self.bot_id, is_bot=True))
            case "GET", ["oauth2", "applications", "@me"]:
                return json_response(self._application())
            case "GET", ["gateway", "bot"]:
                limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
                return json_response(
                    {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}
                )
            case "PUT", ["applications", app_id, "commands"] if int(app_id) == self.app_id:
                if problem := command_problem(body):
                    return invalid_form(*problem)
                self.app_commands = registered_commands(self, body)
                return json_response(self.app_commands)
            case "POST", ["channels", channel_id, "messages"]:
                return self._create_message(int(channel_id), body)
            case "PATCH", ["channels", channel_id, "messages", message_id]:
                return self._edit_message(int(channel_id), int(message_id), body)
            case "POST", ["channels", channel_id, "typing"] if (
                int(channel_id) in self._channel_ids()
            ):
                return web.Response(status=204)
        return json_response({"message": "404: Not Found", "code": 0}, status=404)

    def _interaction_callback(self, path: str, body: Any, *, with_response: bool) -> web.Response:
        parts = path.strip("/").split("/")
        known = self.interactions.get(int(parts[1])) if parts[1].isdigit() else None
        if len(parts) != 4 or parts[3] != "callback" or known is None or known["token"] != parts[2]:
            return json_response({"message": "Unknown interaction", "code": 10062}, status=404)
        if known["type"] is not None:
            message = "Interaction has already been acknowledged."
            return json_response({"message": message, "code": 40060}, status=400)
        return interaction_callback(self, int(parts[1]), known, body, with_response)

    def _create_message(self, channel_id: int, body: Any) -> web.Response:
        if channel_id not in self._channel_ids():
            return json_response({"message": "Unknown Channel", "code": 10003}, status=404)
        files = body.pop("_files", []) if isinstance(body, dict) else []
        if files and not body.get("content"):
            body["content"] = ""  # Discord: content, embeds or files; a file alone is a message
        elif problem := content_problem(body):
            return invalid_form("content", problem)
        if sum(len(data) for _, data in files) > UPLOAD_LIMIT:
            return json_response({"message": "Request entity too large", "code": 40005}, status=413)
        if problem := components_problem(body.get("components", [])):
            return invalid_form("components", problem)
        reference, referenced = body.get("message_reference"), None
        if reference is not None:
            referenced = self.messages.get(int(reference["message_id"]))
            if referenced is None and reference.get("fail_if_not_exists", True):
                return invalid_form("message_reference", "Unknown message")
        author = self._user(self.bot_id, is_bot=True)
        payload = self._message(channel_id=channel_id, author=author, content=body["content"])
        payload["components"] = body.get("components", [])
        payload["attachments"] = [
            self.attachment(data, name, "application/octet-stream") for name, data in files
        ]
        self.uploads += [(channel_id, name, data, body["content"]) for name, data in files]
        if referenced is not None:
            ref = {
                "type": 0,
                "message_id": referenced["id"],
                "channel_id": referenced["channel_id"],
            }
            if "guild_id" in referenced:
                ref["guild_id"] = referenced["guild_id"]
            payload |= {"type": 19, "message_reference": ref, "referenced_message": referenced}
        self.messages[int(payload["id"])] = payload
        return json_response(payload)

    def _edit_message(self, channel_id: int, message_id: int, body: Any) -> web.Response:
        message = self.messages.get(message_id)
        if message is None or int(message["channel_id"]) != channel_id:
            return json_response({"message": "Unknown Message", "code": 10008}, status=404)
        if int(message["author"]["id"]) != self.bot_id:
            return json_response(
                {"message": "Cannot edit a message authored by another user", "code": 50005},
                status=403,
            )
        if problem := content_problem(body):
            return invalid_form("content", problem)
        if problem := components_problem(body.get("components", [])):
            return invalid_form("components", problem)
        message.update(content=body["content"], edited_timestamp=TIMESTAMP)
        if "components" in body:
            message["components"] = body["components"]
        return json_response(message)

    # payloads -----------------------------------------------------------------------------

    def _channel_ids(self) -> set[int]:
        return {self.general_id, self.random_id, self.thread_id, self.dm_id}

    def _user(self, user_id: int, *, is_bot: bool = False) -> dict[str, Any]:
        names = {self.bot_id: "hermes", self.human_id: "ada", self.owner_id: "owner"}
        return {
            "id": str(user_id),
            "username": names.get(user_id, f"user{user_id % 1000}"),
            "discriminator": "0",
            "global_name": None,
            "avatar": None,
            "bot": is_bot,
            "public_flags": 0,
        }

    def _application(self) -> dict[str, Any]:
        return {
            "id": str(self.app_id),
            "name": "hermes",
            "icon": None,
            "description": "",
            "rpc_origins": [],
            "bot_public": True,
            "bot_require_code_grant": False,
            "owner": self._user(self.owner_id),
            "summary": "",
            "verify_key": "0" * 64,
            "team": None,
            "flags": 0,
            "interactions_endpoint_url": None,
        }

    def _message(self, *, channel_id: int, author: dict[str, Any], content: str) -> dict[str, Any]:
        mentioned = {int(m) for m in _MENTION.findall(content)}
        known = (self.bot_id, self.human_id, self.other_bot_id)
        payload: dict[str, Any] = {
            "id": str(next(self._message_ids)),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": TIMESTAMP,
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [self._user(u, is_bot=u != self.human_id) for u in known if u in mentioned],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "components": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        if channel_id != self.dm_id:
            member = {"roles": [], "joined_at": TIMESTAMP, "deaf": False, "mute": False, "flags": 0}
            payload |= {"guild_id": str(self.guild_id), "member": member}
        return payload

    def _guild(self) -> dict[str, Any]:
        return guild_payload(self)


@pytest_asyncio.fixture
async def patch_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """A running FakeDiscord with discord.py's REST base and gateway URL pointed at it."""
    patch_points = (
        (discord.http.Route, "BASE"),
        (discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY"),
    )
    for owner, attribute in patch_points:
        if not hasattr(owner, attribute):
            pytest.fail(
                f"discord.py changed: {owner.__qualname__}.{attribute} is gone; fix the fake"
            )
    fake = FakeDiscord()
    await fake.start()
    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url)
    )
    try:
        yield fake
    finally:
        await fake.close()
