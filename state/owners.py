"""Who a session belongs to: the owner keys, spelled in one place, and the read scope over them.

Every session row carries an `owner` (schema v7). A person's owner key is `<platform>:<id>`
(the same string as `agent.access.Principal.owner`): `terminal:local` for the machine's owner
at the terminal and `hermes chat -q`, `http:<key name>` for an HTTP API key, `telegram:111` for
a chat user in a direct chat. A group chat's sessions belong to the chat, not to whoever spoke:
`telegram:chat:<chat id>` (`chat_owner`), so what was said in a group is found in that group
only, and nothing a member said privately ever surfaces there.

`state.values.ReadScope` is what a reader may see: the sessions of one owner, or (an admin
widened by config, `privacy.admins_read_all`) every owner's. Stores filter by it in SQL, never
after the fact. Pure functions; no I/O.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_HTTP_OWNER",
    "LOCAL_OWNER",
    "chat_owner",
    "legacy_owner",
    "person_owner",
]

LOCAL_OWNER = "terminal:local"
"""The machine's owner: the terminal chat, `hermes chat -q`, and sessions of unknown origin."""
DEFAULT_HTTP_OWNER = "http:default"
"""The single `gateway.http.api_key` (an admin key named "default")."""
_GROUP_PLATFORMS = frozenset({"telegram", "discord"})


def person_owner(platform: str, person_id: str) -> str:
    """A person behind one front door: `telegram:111`, `http:alice` (= `Principal.owner`)."""
    return f"{platform}:{person_id}"


def chat_owner(platform: str, chat_id: str) -> str:
    """A group chat (Telegram group, Discord channel): `telegram:chat:-1001`. Every session
    of the chat (per user or per chat, threads included) belongs to it, and its members see
    only those in it."""
    return f"{platform}:chat:{chat_id}"


def legacy_owner(platform: str, chat_key: str | None, user_id: str | None) -> str:
    """The owner a session stored before schema v7 gets, from its route: a chat user's direct
    chat (`telegram:dm:111`) is theirs, a group's (`telegram:chat:-100…`) the chat's; HTTP
    sessions the admin key (which key made them was not recorded); the terminal's, and
    anything else, the machine's owner."""
    if platform == "http":
        return DEFAULT_HTTP_OWNER
    if platform not in _GROUP_PLATFORMS:
        return LOCAL_OWNER
    parts = (chat_key or "").split(":")
    if parts[:1] == [platform]:
        parts = parts[1:]  # the runner keys routes `<platform>:<chat key>`
    if len(parts) >= 2 and parts[0] == "dm" and parts[1]:
        return person_owner(platform, parts[1])
    if len(parts) >= 2 and parts[0] == "chat" and parts[1]:
        return chat_owner(platform, parts[1])
    if user_id:
        return person_owner(platform, user_id)
    return LOCAL_OWNER
