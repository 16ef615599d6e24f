"""Principals: who may talk to the bot, with which tools, as admin or not, and who can approve."""

from __future__ import annotations

from typing import Any

import pytest

from agent.config import TOOL_NAMES, HermesConfig, parse_config
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.principals import may_answer_approvals, resolve_principal

ALL = frozenset(TOOL_NAMES)
REMOTE_DEFAULT = ALL - {"terminal", "write_file"}


def _msg(platform: str = "telegram", *, user: str = "7", direct: bool = True) -> InboundMessage:
    return InboundMessage(
        chat=ChatRef(platform=platform, chat_id="100"),  # type: ignore[arg-type]
        user_id=user,
        text="hi",
        is_direct=direct,
    )


def _config(**gateway: Any) -> HermesConfig:
    return parse_config({"gateway": gateway})


def test_unknown_users_are_refused_by_default() -> None:
    """With empty allowlists nobody may talk to the Telegram or Discord bot."""
    for platform in ("telegram", "discord"):
        assert resolve_principal(_msg(platform), _config(), has_approval_channel=True) is None


def test_allowlist_admits_named_users_only() -> None:
    """Only the ids on a platform's allowlist pass, and only on that platform."""
    config = _config(telegram={"allowed_users": [7]})
    assert resolve_principal(_msg("telegram", user="7"), config, has_approval_channel=True)
    assert resolve_principal(_msg("telegram", user="8"), config, has_approval_channel=True) is None
    assert resolve_principal(_msg("discord", user="7"), config, has_approval_channel=True) is None


def test_the_terminal_operator_gets_everything() -> None:
    """The terminal is the operator: admin, every enabled tool, approves when a TTY exists."""
    config = _config()
    with_tty = resolve_principal(_msg("terminal"), config, has_approval_channel=True)
    without = resolve_principal(_msg("terminal"), config, has_approval_channel=False)
    assert with_tty is not None and without is not None
    assert with_tty.admin and with_tty.tools == ALL and with_tty.can_approve
    assert not without.can_approve


def test_the_http_key_is_admin_without_terminal_or_writes() -> None:
    """The one API key is an admin, but gets no terminal and no write_file unless granted."""
    default = resolve_principal(_msg("http"), _config(), has_approval_channel=False)
    assert default is not None and default.admin and default.id == "default"
    assert default.tools == REMOTE_DEFAULT and not default.can_approve
    granted = resolve_principal(
        _msg("http"), _config(http={"tools": ["terminal"]}), has_approval_channel=True
    )
    assert granted is not None and granted.tools == {"terminal"} and not granted.can_approve


def test_named_http_keys_have_their_role_and_tools() -> None:
    """`gateway.http.keys`: a user key is no admin and gets the remote default unless granted;
    an admin key is one; a name no longer in config is refused."""
    config = _config(
        http={
            "keys": [
                {"name": "alice", "key": "a", "role": "user"},
                {"name": "bob", "key": "b", "role": "user", "tools": ["terminal"]},
                {"name": "ops", "key_env": "OPS_KEY", "role": "admin"},
            ]
        }
    )

    def principal(name: str | None) -> Any:
        message = _msg("http")
        message = InboundMessage(
            chat=message.chat, user_id="u", text="hi", is_direct=True, credential=name
        )
        return resolve_principal(message, config, has_approval_channel=False)

    alice, bob, ops = principal("alice"), principal("bob"), principal("ops")
    assert (alice.id, alice.admin, alice.tools) == ("alice", False, REMOTE_DEFAULT)
    assert (bob.admin, bob.tools) == (False, {"terminal"})
    assert (ops.admin, ops.tools) == (True, REMOTE_DEFAULT)
    assert principal("mallory") is None


def test_an_http_key_needs_exactly_one_secret_and_a_unique_name() -> None:
    from agent.errors import ConfigError

    with pytest.raises(ConfigError, match="exactly one of key or key_env"):
        _config(http={"keys": [{"name": "a", "role": "user"}]})
    with pytest.raises(ConfigError, match="'default' is used twice"):
        _config(http={"api_key": "x", "keys": [{"name": "default", "key": "y"}]})


@pytest.mark.parametrize("platform", ["telegram", "discord"])
def test_chat_users_get_platform_then_per_user_grants(platform: str) -> None:
    """No grant: no terminal, no write_file; `tools` sets the platform; `user_tools` one user."""
    config = _config(
        **{platform: {"allowed_users": [1, 2, 3], "tools": ["read_file"], "user_tools": {2: []}}}
    )
    plain = _config(**{platform: {"allowed_users": [1]}})
    defaulted = resolve_principal(_msg(platform, user="1"), plain, has_approval_channel=True)
    assert defaulted is not None and defaulted.tools == REMOTE_DEFAULT
    one = resolve_principal(_msg(platform, user="1"), config, has_approval_channel=True)
    two = resolve_principal(_msg(platform, user="2"), config, has_approval_channel=True)
    assert one is not None and one.tools == {"read_file"}
    assert two is not None and two.tools == frozenset()


def test_grants_outside_tools_enabled_are_a_config_error() -> None:
    """Granting a tool that is switched off is a mistake worth naming at start-up."""
    from agent.errors import ConfigError

    with pytest.raises(ConfigError, match="gateway.telegram.user_tools.5"):
        parse_config(
            {
                "tools": {"enabled": ["read_file"]},
                "gateway": {"telegram": {"user_tools": {5: ["terminal"]}}},
            }
        )


def test_admins_are_per_platform_and_approve_where_they_are() -> None:
    """Admin rights and approvals come from the platform's admins list; a group needs one."""
    config = _config(discord={"allowed_users": ["1", "2"], "admins": ["1"]})
    admin = resolve_principal(_msg("discord", user="1"), config, has_approval_channel=True)
    user_dm = resolve_principal(_msg("discord", user="2"), config, has_approval_channel=True)
    user_group = resolve_principal(
        _msg("discord", user="2", direct=False), config, has_approval_channel=True
    )
    no_buttons = resolve_principal(_msg("discord", user="1"), config, has_approval_channel=False)
    assert admin is not None and admin.admin and admin.can_approve
    assert user_dm is not None and not user_dm.admin and not user_dm.can_approve
    assert user_group is not None and user_group.can_approve  # an admin in the group answers
    assert no_buttons is not None and not no_buttons.can_approve
    judge = may_answer_approvals(_msg("discord", user="2"), config)
    assert judge("1") and not judge("2")


def test_remote_terminal_grants_are_listed_for_the_start_up_warning() -> None:
    """Every key that hands the terminal to a remote caller is named; others are not."""
    from gateway.principals import remote_terminal_grants

    config = _config(
        http={"tools": ["terminal"]},
        telegram={"tools": ["read_file"], "user_tools": {9: ["terminal"]}},
    )
    assert remote_terminal_grants(config) == ["gateway.http.tools", "gateway.telegram.user_tools.9"]
    assert remote_terminal_grants(_config()) == []


def _with_mcp(**gateway: Any) -> HermesConfig:
    return parse_config(
        {
            "tools": {"enabled": [*TOOL_NAMES, "web_fetch", "web_search"]},
            "mcp": {
                "servers": {"files": {"command": "x"}, "off": {"command": "y", "enabled": False}}
            },
            "gateway": gateway,
        }
    )


def test_remote_callers_get_no_web_or_mcp_tool_without_a_grant() -> None:
    """Web tools enabled and an MCP server configured: the default HTTP key and an allowed
    chat user get neither; the terminal gets both, and every enabled server."""
    config = _with_mcp(telegram={"allowed_users": [7]})
    for message in (_msg("http"), _msg("telegram")):
        principal = resolve_principal(message, config, has_approval_channel=False)
        assert principal is not None
        assert principal.tools == REMOTE_DEFAULT
        assert not principal.may_use("web_fetch") and not principal.may_use("files__read")
    terminal = resolve_principal(_msg("terminal"), config, has_approval_channel=True)
    assert terminal is not None
    assert terminal.may_use("web_search") and terminal.may_use("files__read")
    assert not terminal.may_use("off__read")


def test_mcp_grants_name_a_server_or_one_tool() -> None:
    """`mcp:files` grants all of that server's tools, `files__read` only that one; a grant of a
    disabled server grants nothing."""
    config = _with_mcp(
        telegram={
            "allowed_users": [7, 8, 9],
            "user_tools": {"7": ["mcp:files"], "8": ["files__read", "web_fetch"], "9": ["mcp:off"]},
        }
    )

    def tools_of(user: str) -> Any:
        principal = resolve_principal(_msg(user=user), config, has_approval_channel=False)
        assert principal is not None
        return principal

    assert tools_of("7").may_use("files__read") and tools_of("7").may_use("files__write")
    assert tools_of("8").may_use("files__read") and not tools_of("8").may_use("files__write")
    assert tools_of("8").may_use("web_fetch") and not tools_of("8").may_use("web_search")
    assert not tools_of("9").may_use("off__read")


def test_a_grant_naming_an_unknown_mcp_server_is_a_config_error() -> None:
    from agent.errors import ConfigError

    with pytest.raises(ConfigError, match="nope__read"):
        _with_mcp(http={"tools": ["nope__read"]})
