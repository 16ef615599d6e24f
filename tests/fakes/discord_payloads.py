"""Payloads of the Discord fake: its guild, JSON responses, and the rules messages are checked against."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from tests.fakes.discord import FakeDiscord

__all__ = [
    "TIMESTAMP",
    "components_problem",
    "content_problem",
    "guild_payload",
    "invalid_form",
    "json_response",
]

TIMESTAMP = "2026-01-01T00:00:00.000000+00:00"


def components_problem(rows: Any) -> str | None:
    """What Discord would reject in a message's components, or None."""
    if not isinstance(rows, list) or len(rows) > 5:
        return "Must be 5 or fewer in length."
    for row in rows:
        if not isinstance(row, dict) or row.get("type") != 1:
            return "Action rows must be of type 1"
        buttons = row.get("components")
        if not isinstance(buttons, list) or not 1 <= len(buttons) <= 5:
            return "An action row holds 1 to 5 components"
        for button in buttons:
            if button.get("type") != 2 or button.get("style") not in (1, 2, 3, 4):
                return "Only non-link buttons are expected here"
            if not 1 <= len(str(button.get("custom_id") or "")) <= 100:
                return "custom_id must be 1-100 characters"
            if len(str(button.get("label") or "")) > 80:
                return "label must be 80 or fewer in length"
    return None


def guild_payload(fake: FakeDiscord) -> dict[str, Any]:
    """The GUILD_CREATE of the fake's one guild: two text channels, a thread, the bot."""

    def text_channel(channel_id: int, name: str, position: int) -> dict[str, Any]:
        return {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(fake.guild_id),
            "name": name,
            "position": position,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "flags": 0,
        }

    thread = {
        "id": str(fake.thread_id),
        "type": 11,
        "guild_id": str(fake.guild_id),
        "parent_id": str(fake.general_id),
        "owner_id": str(fake.human_id),
        "name": "a thread",
        "message_count": 0,
        "member_count": 2,
        "rate_limit_per_user": 0,
        "flags": 0,
        "last_message_id": None,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": TIMESTAMP,
            "locked": False,
        },
    }
    everyone = {
        "id": str(fake.guild_id),
        "name": "@everyone",
        "permissions": "1071698660929",
        "position": 0,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    bot_member = {
        "user": fake._user(fake.bot_id, is_bot=True),
        "roles": [],
        "joined_at": TIMESTAMP,
        "deaf": False,
        "mute": False,
        "flags": 0,
    }
    return {
        "id": str(fake.guild_id),
        "name": "hermes-lab",
        "icon": None,
        "owner_id": str(fake.owner_id),
        "unavailable": False,
        "large": False,
        "member_count": 2,
        "joined_at": TIMESTAMP,
        "features": [],
        "roles": [everyone],
        "emojis": [],
        "stickers": [],
        "channels": [
            text_channel(fake.general_id, "general", 0),
            text_channel(fake.random_id, "random", 1),
        ],
        "threads": [thread],
        "members": [bot_member],
        "presences": [],
        "voice_states": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
        "preferred_locale": "en-US",
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "nsfw_level": 0,
        "premium_tier": 0,
        "afk_timeout": 300,
        "system_channel_flags": 0,
    }


def json_response(
    obj: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response with the bare content type discord.py insists on (no charset)."""
    return web.Response(
        body=json.dumps(obj).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def content_problem(body: Any) -> str | None:
    if not isinstance(body, dict) or not isinstance(body.get("content"), str):
        return "This field is required"
    if not body["content"]:
        return "Cannot send an empty message"
    if len(body["content"]) > 2000:
        return "Must be 2000 or fewer in length."
    return None


def invalid_form(field: str, problem: str) -> web.Response:
    errors = {field: {"_errors": [{"code": "INVALID", "message": problem}]}}
    return json_response(
        {"message": "Invalid Form Body", "code": 50035, "errors": errors}, status=400
    )
