"""Who sent a message and what they may do: the one place a `Principal` is resolved from config.

- terminal: the operator (id `local`, whatever the login); every enabled tool, admin; can
  approve when there is a TTY;
- http: the API key that authenticated the request (`InboundMessage.credential`); the single
  `gateway.http.api_key` is one admin key named "default" with `gateway.http.tools`; a key of
  `gateway.http.keys` has its own role (admin or user) and tools;
- telegram, discord: an allowed user (else None: refused); admin when listed in `admins`; tools
  from `user_tools[user]`, else the platform's `tools`; can approve in a direct chat when they
  are an admin, in a group when the platform has admins (an admin of the chat answers).

Without a grant, HTTP and chat users get every enabled tool except terminal, write_file and
the web tools, and no MCP tool: a grant names those (`mcp:SERVER` for all of a server's tools,
`SERVER__TOOL` for one). The terminal user gets every enabled tool and every enabled MCP server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import assert_never, cast

from agent.access import MCP_GRANT_PREFIX, Principal, TurnAccess, mcp_server_of_grant
from agent.config import DiscordConfig, HermesConfig, TelegramConfig
from gateway.platforms.base import ChatRef, InboundMessage, PlatformName
from state import ReadScope, SessionInfo, chat_owner

__all__ = [
    "DEFAULT_HTTP_KEY",
    "LOCAL_ID",
    "conversation_owner",
    "may_continue",
    "read_scope",
    "WITHHELD_BY_DEFAULT",
    "may_answer_approvals",
    "principal_for_owner",
    "remote_terminal_grants",
    "resolve_principal",
]

WITHHELD_BY_DEFAULT = frozenset({"terminal", "write_file", "web_fetch", "web_search"})
"""Tools remote callers get only when a grant names them."""
DEFAULT_HTTP_KEY = "default"
"""The name of `gateway.http.api_key` (and of HERMES_API_KEY)."""
LOCAL_ID = "local"
"""The terminal principal's id: its owner key is `terminal:local` on every login."""


def resolve_principal(
    message: InboundMessage, config: HermesConfig, *, has_approval_channel: bool
) -> Principal | None:
    """The principal behind `message`; None when the sender may not talk to the bot at all."""
    enabled = tuple(config.tools.enabled)
    platform = message.chat.platform
    match platform:
        case "terminal":
            return Principal(  # the machine's owner, whatever their login name
                platform=platform,
                id=LOCAL_ID,
                name=message.user_name or message.user_id,
                admin=True,
                tools=frozenset(enabled)
                | {f"{MCP_GRANT_PREFIX}{s}" for s in config.mcp.enabled_servers()},
                can_approve=has_approval_channel,
            )
        case "http":
            return _http_principal(message.credential or DEFAULT_HTTP_KEY, config, enabled)
        case "telegram" | "discord":
            section = _section(platform, config)
            user = message.user_id
            if user not in section.allowed_users:
                return None
            is_admin = user in section.admins
            answerable = is_admin if message.is_direct else bool(section.admins)
            return Principal(
                platform=platform,
                id=user,
                name=message.user_name,
                admin=is_admin,
                tools=_granted(section.user_tools.get(user, section.tools), enabled, config),
                can_approve=has_approval_channel and answerable,
            )
        case unreachable:
            assert_never(unreachable)


def principal_for_owner(owner: str, config: HermesConfig) -> Principal | None:
    """The principal an owner key (`Principal.owner`, e.g. `telegram:42`) stands for under the
    current config, for work done in their name while nobody is there (a scheduled job): None
    when they are no longer allowed (a revoked user, a removed key). Nobody can approve."""
    platform, _, user = owner.partition(":")
    if not user or platform not in ("terminal", "http", "telegram", "discord"):
        return None
    message = InboundMessage(
        chat=ChatRef(platform=cast(PlatformName, platform), chat_id=user),
        user_id=user,
        text="",
        is_direct=True,
        credential=user if platform == "http" else None,
    )
    return resolve_principal(message, config, has_approval_channel=False)


def _http_principal(name: str, config: HermesConfig, enabled: Sequence[str]) -> Principal | None:
    """The key named `name`: the single `api_key` is admin with `gateway.http.tools`; a named
    key has its own role and tools; an unknown name (a key removed from config) is refused."""
    http = config.gateway.http
    if name == DEFAULT_HTTP_KEY and not any(k.name == name for k in http.keys):
        admin, grant = True, http.tools
    else:
        key = next((k for k in http.keys if k.name == name), None)
        if key is None:
            return None
        admin, grant = key.role == "admin", key.tools
    return Principal(
        platform="http",
        id=name,
        admin=admin,
        tools=_granted(grant, enabled, config),
        can_approve=False,
    )


def conversation_owner(message: InboundMessage, principal: Principal) -> str:
    """Who owns the conversation `message` belongs to: a group chat (Telegram group, Discord
    channel, their threads) owns its sessions (`state.chat_owner`), so nothing said there is
    found elsewhere and nothing said elsewhere is found there; everywhere else the person
    (`Principal.owner`)."""
    platform = message.chat.platform
    if platform in ("telegram", "discord") and not message.is_direct:
        return chat_owner(platform, message.chat.chat_id)
    return principal.owner


def read_scope(message: InboundMessage, principal: Principal, config: HermesConfig) -> ReadScope:
    """What a turn for `principal` in `message`'s conversation may read: that conversation
    owner's sessions; every owner's for an admin when `privacy.admins_read_all` is on, except
    in a group chat (what is read there is posted for the whole group)."""
    owner = conversation_owner(message, principal)
    widened = principal.admin and config.privacy.admins_read_all and owner == principal.owner
    return ReadScope(owner=owner, everyone=widened)


def may_continue(access: TurnAccess, info: SessionInfo | None) -> bool:
    """Whether a turn may run on the session its front door named (HTTP, terminal): only on
    its owner's, except for the machine's owner at the terminal (who owns the machine)."""
    if info is None or access.principal.platform == "terminal":
        return True
    return access.reads.owner == info.owner


def may_answer_approvals(message: InboundMessage, config: HermesConfig) -> Callable[[str], bool]:
    """Who may press "Allow" on an approval asked in `message`'s chat: that platform's admins."""
    platform = message.chat.platform
    if platform not in ("telegram", "discord"):
        return lambda _user_id: False
    admins = frozenset(_section(platform, config).admins)
    return lambda user_id: user_id in admins


def remote_terminal_grants(config: HermesConfig) -> list[str]:
    """The config keys that give remote callers the terminal (worth a warning without bwrap)."""
    gw = config.gateway
    grants: list[tuple[str, list[str] | None]] = [("gateway.http.tools", gw.http.tools)]
    grants += [(f"gateway.http.keys.{k.name}.tools", k.tools) for k in gw.http.keys]
    for name, section in (("telegram", gw.telegram), ("discord", gw.discord)):
        grants.append((f"gateway.{name}.tools", section.tools))
        grants += [(f"gateway.{name}.user_tools.{u}", t) for u, t in section.user_tools.items()]
    return [key for key, tools in grants if tools is not None and "terminal" in tools]


def _granted(
    grant: Sequence[str] | None, enabled: Sequence[str], config: HermesConfig
) -> frozenset[str]:
    """What a remote caller may use: the grant's enabled tools and enabled MCP servers' tools;
    no grant: the enabled tools but the withheld ones, and no MCP tool."""
    if grant is None:
        return frozenset(enabled) - WITHHELD_BY_DEFAULT
    servers = frozenset(config.mcp.enabled_servers())
    return frozenset(t for t in grant if t in enabled or mcp_server_of_grant(t) in servers)


def _section(platform: str, config: HermesConfig) -> TelegramConfig | DiscordConfig:
    return config.gateway.telegram if platform == "telegram" else config.gateway.discord
