"""The Discord fake's interactions: application commands, their invocations and responses, embeds.

Application commands (https://discord.com/developers/docs/interactions/application-commands):
`PUT /applications/{id}/commands` overwrites the global commands in bulk; a CHAT_INPUT name (and
an option's) matches `^[-_'\\p{L}\\p{N}]{1,32}$` in lowercase, a description has 1-100
characters, at most 25 options, required options first. An invocation is an `INTERACTION_CREATE`
of type 2 (APPLICATION_COMMAND) carrying `data.name` and `data.options` (type 3, STRING).

Responding (https://discord.com/developers/docs/interactions/receiving-and-responding): one
`POST /interactions/{id}/{token}/callback` — type 4 (CHANNEL_MESSAGE_WITH_SOURCE) posts a message,
type 5 (DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE) a "thinking…" placeholder (flag 128, LOADING);
then `PATCH /webhooks/{application.id}/{token}/messages/@original` edits the response and
`POST /webhooks/{application.id}/{token}` sends follow-ups (`?wait=true` returns the message).
Webhook routes need no bot token: the interaction token authenticates.

Embeds (https://discord.com/developers/docs/resources/message#embed-object-embed-limits): title
256, description 4096, at most 25 fields (name 256, value 1024), footer 2048, author name 256,
6000 characters in all; a message holds at most 10 embeds, and content or an embed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakes.discord_payloads import (
    TIMESTAMP,
    components_problem,
    invalid_form,
    json_response,
)

if TYPE_CHECKING:
    from tests.fakes.discord import FakeDiscord

__all__ = [
    "command_problem",
    "embeds_problem",
    "interaction_callback",
    "interaction_payload",
    "registered_commands",
    "webhook_response",
]

_NAME = re.compile(r"^[-_'\w]{1,32}$")
LOADING_FLAG = 128
EPHEMERAL_FLAG = 64


def command_problem(commands: Any) -> tuple[str, str] | None:
    """(field path, message) of what Discord would reject in a bulk overwrite, or None."""
    if not isinstance(commands, list) or len(commands) > 100:
        return "_root", "Must be 100 or fewer in length."
    names: set[str] = set()
    for index, command in enumerate(commands):
        if not isinstance(command, dict):
            return str(index), "Must be an object"
        problem = _named_problem(command) or _options_problem(command.get("options") or [])
        if problem:
            return f"{index}.{problem[0]}", problem[1]
        if command["name"] in names:
            return f"{index}.name", "Application command names must be unique"
        names.add(command["name"])
    return None


def registered_commands(fake: FakeDiscord, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The application command objects Discord answers a bulk overwrite with."""
    registered = []
    for position, command in enumerate(commands):
        registered.append(
            {
                "id": str(fake.app_id + 1000 + position),
                "application_id": str(fake.app_id),
                "version": str(fake.app_id + 2000 + position),
                "type": command.get("type", 1),
                "name": command["name"],
                "description": command["description"],
                "options": command.get("options") or [],
                "default_member_permissions": command.get("default_member_permissions"),
                "nsfw": bool(command.get("nsfw", False)),
                "contexts": command.get("contexts"),
                "integration_types": command.get("integration_types") or [0],
            }
        )
    return registered


def embeds_problem(embeds: Any) -> str | None:
    """What Discord would reject in a message's embeds, or None."""
    if not isinstance(embeds, list) or len(embeds) > 10:
        return "Must be 10 or fewer in length."
    for embed in embeds:
        limits = {"title": 256, "description": 4096}
        for key, limit in limits.items():
            if len(str(embed.get(key) or "")) > limit:
                return f"{key}: Must be {limit} or fewer in length."
        fields = embed.get("fields") or []
        if len(fields) > 25:
            return "fields: Must be 25 or fewer in length."
        for field in fields:
            if not 1 <= len(str(field.get("name") or "")) <= 256:
                return "fields.name: Must be between 1 and 256 in length."
            if not 1 <= len(str(field.get("value") or "")) <= 1024:
                return "fields.value: Must be between 1 and 1024 in length."
        if len(str((embed.get("footer") or {}).get("text") or "")) > 2048:
            return "footer.text: Must be 2048 or fewer in length."
        if _embed_size(embed) > 6000:
            return "Embed size exceeds maximum size of 6000"
    return None


def interaction_payload(
    fake: FakeDiscord,
    *,
    interaction_id: int,
    kind: int,
    data: dict[str, Any],
    channel_id: int,
    user_id: int,
    message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An INTERACTION_CREATE body as Discord sends it in a guild channel, a thread or a DM."""
    user = fake._user(user_id)
    payload: dict[str, Any] = {
        "id": str(interaction_id),
        "application_id": str(fake.app_id),
        "type": kind,
        "data": data,
        "channel_id": str(channel_id),
        "token": f"interaction-token-{interaction_id}",
        "version": 1,
        "app_permissions": "0",
        "locale": "en-US",
        "entitlements": [],
        "authorizing_integration_owners": {},
        "attachment_size_limit": 8 * 1024 * 1024,
    }
    if message is not None:
        payload["message"] = message
    if channel_id == fake.dm_id:
        return payload | {
            "channel": {"id": str(channel_id), "type": 1, "recipients": [user]},
            "user": user,
            "context": 1,
        }
    member = {"user": user, "roles": [], "joined_at": TIMESTAMP, "deaf": False, "mute": False,
              "flags": 0, "permissions": "0"}  # fmt: skip
    channel: dict[str, Any] = {"id": str(channel_id), "type": 0, "guild_id": str(fake.guild_id)}
    if channel_id == fake.thread_id:
        channel |= {"type": 11, "parent_id": str(fake.general_id), "name": "a thread"}
    return payload | {
        "guild_id": str(fake.guild_id),
        "guild_locale": "en-US",
        "channel": channel,
        "member": member,
        "context": 0,
    }


def interaction_callback(
    fake: FakeDiscord,
    interaction_id: int,
    known: dict[str, Any],
    body: Any,
    with_response: bool,
) -> web.Response:
    """The one response an interaction gets (its id and token already checked)."""
    kind, data = body.get("type"), body.get("data") or {}
    message: dict[str, Any] | None = None
    if known["kind"] == 3:
        message = fake.messages[known["message_id"]]
        if kind == 7:
            if problem := components_problem(data.get("components", [])):
                return invalid_form("components", problem)
            message.update({k: data[k] for k in ("content", "components") if k in data})
        elif kind == 4 and int(data.get("flags", 0)) & EPHEMERAL_FLAG:
            fake.ephemeral_replies.append((interaction_id, str(data.get("content", ""))))
        elif kind not in (5, 6):
            return invalid_form("type", f"interaction response type {kind} not supported here")
    elif kind in (4, 5):
        if kind == 4 and (problem := _message_problem(data)):
            return invalid_form(*problem)
        flags = int(data.get("flags", 0)) | (LOADING_FLAG if kind == 5 else 0)
        message = _response_message(fake, known, {**data, "flags": flags})
        known["original_id"] = int(message["id"])
    else:
        return invalid_form("type", f"Interaction response type {kind} is only for components")
    known["type"] = kind
    if not with_response:
        return web.Response(status=204)
    interaction = {"id": str(interaction_id), "type": known["kind"],
                   "response_message_loading": kind == 5,
                   "response_message_ephemeral": kind == 4 and known["kind"] == 3}  # fmt: skip
    resource: dict[str, Any] = {"type": kind}
    if message is not None and kind != 4:
        interaction["response_message_id"] = message["id"]
        resource["message"] = message
    return json_response({"interaction": interaction, "resource": resource})


def webhook_response(fake: FakeDiscord, method: str, path: str, body: Any) -> web.Response:
    """`/webhooks/{application.id}/{token}[/messages/{@original|id}]` for interactions."""
    parts = path.strip("/").split("/")
    known = next(
        (i for i in fake.interactions.values() if len(parts) >= 3 and i["token"] == parts[2]),
        None,
    )
    if known is None or parts[1] != str(fake.app_id) or known["type"] is None:
        return json_response({"message": "Unknown Webhook", "code": 10015}, status=404)
    match method, parts[3:]:
        case "POST", []:
            if problem := _message_problem(body):
                return invalid_form(*problem)
            followup = _response_message(fake, known, body)
            known.setdefault("followups", []).append(int(followup["id"]))
            return json_response(followup)
        case "PATCH", ["messages", target]:
            message_id = known.get("original_id") if target == "@original" else int(target)
            message = fake.messages.get(message_id or 0)
            if message is None or message_id not in (
                known.get("original_id"),
                *known.get("followups", []),
            ):
                return json_response({"message": "Unknown Message", "code": 10008}, status=404)
            edited = {**message, **{k: body[k] for k in ("content", "embeds") if k in body}}
            if problem := _message_problem({**edited, "content": edited.get("content") or ""}):
                return invalid_form(*problem)
            message.update(edited, flags=int(message["flags"]) & ~LOADING_FLAG)
            message["edited_timestamp"] = TIMESTAMP
            return json_response(message)
    return json_response({"message": "405: Method Not Allowed", "code": 0}, status=405)


def _response_message(
    fake: FakeDiscord, known: dict[str, Any], data: dict[str, Any]
) -> dict[str, Any]:
    author = fake._user(fake.bot_id, is_bot=True)
    channel_id = int(known["channel_id"])
    message = fake._message(channel_id=channel_id, author=author, content=data.get("content") or "")
    message |= {
        "type": 20,
        "flags": int(data.get("flags", 0)),
        "embeds": data.get("embeds") or [],
        "webhook_id": str(fake.app_id),
        "application_id": str(fake.app_id),
    }
    fake.messages[int(message["id"])] = message
    return message


def _message_problem(data: Any) -> tuple[str, str] | None:
    """(field, message) of what Discord would reject in an interaction message, or None."""
    if not isinstance(data, dict):
        return "_root", "Must be an object"
    content, embeds = data.get("content") or "", data.get("embeds") or []
    if len(content) > 2000:
        return "content", "Must be 2000 or fewer in length."
    if problem := embeds_problem(embeds):
        return "embeds", problem
    if not content and not embeds:
        return "content", "Cannot send an empty message"
    return None


def _named_problem(item: dict[str, Any]) -> tuple[str, str] | None:
    name, description = item.get("name"), item.get("description")
    if not isinstance(name, str) or not _NAME.match(name) or name != name.lower():
        return "name", "Command name is invalid"
    if not isinstance(description, str) or not 1 <= len(description) <= 100:
        return "description", "Must be between 1 and 100 in length."
    return None


def _options_problem(options: Any) -> tuple[str, str] | None:
    if not isinstance(options, list) or len(options) > 25:
        return "options", "Must be 25 or fewer in length."
    seen_optional = False
    for index, option in enumerate(options):
        problem = _named_problem(option)
        if problem:
            return f"options.{index}.{problem[0]}", problem[1]
        if option.get("required") and seen_optional:
            return (
                f"options.{index}.required",
                "Required options must be placed before non-required options",
            )
        seen_optional |= not option.get("required")
    return None


def _embed_size(embed: dict[str, Any]) -> int:
    size = len(str(embed.get("title") or "")) + len(str(embed.get("description") or ""))
    size += len(str((embed.get("footer") or {}).get("text") or ""))
    size += len(str((embed.get("author") or {}).get("name") or ""))
    for field in embed.get("fields") or []:
        size += len(str(field.get("name") or "")) + len(str(field.get("value") or ""))
    return size
