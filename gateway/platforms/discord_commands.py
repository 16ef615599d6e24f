"""Discord slash commands from the one command table, answered through the runner like any message.

Every `gateway.commands.COMMANDS` entry becomes a CHAT_INPUT application command (an argument
becomes one string option), registered with a bulk overwrite at start
(https://discord.com/developers/docs/interactions/application-commands#bulk-overwrite-global-
application-commands). An invocation arrives as an `INTERACTION_CREATE` of type 2; it is
deferred at once (Discord wants an answer within three seconds: "thinking…"), then handed to the
runner as the text `/name argument`. The runner's reply becomes the interaction's response (the
deferred message is edited), further pieces are follow-ups, and `/status` answers with an embed.
An interaction token lives fifteen minutes, so pending interactions are forgotten after that.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import discord
from discord import app_commands

from gateway.commands import COMMANDS, CommandSpec
from gateway.platforms.base import ChatRef, InboundMessage, PlatformName

__all__ = [
    "INTERACTION_PREFIX",
    "InteractionFacts",
    "InteractionReplies",
    "build_command_tree",
    "inbound_from_interaction",
    "interaction_facts",
    "status_embed",
]

PLATFORM: PlatformName = "discord"
INTERACTION_PREFIX = "interaction:"
"""`ChatRef.reply_to_message_id` of a slash command: the reply answers the interaction."""
INTERACTION_TTL_S = 15 * 60.0
MAX_PENDING = 256
_EMBED_COLOUR = discord.Colour.blurple()

OnCommand = Callable[[discord.Interaction, CommandSpec, str], Awaitable[None]]


def build_command_tree(client: discord.Client, on_command: OnCommand) -> app_commands.CommandTree:
    """A CommandTree holding one slash command per table entry, all calling `on_command`."""
    tree: app_commands.CommandTree = app_commands.CommandTree(client)
    for spec in COMMANDS:
        tree.add_command(_slash_command(spec, on_command))
    return tree


@dataclass(frozen=True, slots=True, kw_only=True)
class InteractionFacts:
    """What the inbound decision needs from a slash-command interaction, as plain values."""

    channel_id: str
    parent_channel_id: str | None
    """The channel a thread belongs to; None when the command was not used in a thread."""
    guild_id: str | None
    """None in a direct message."""
    user_id: str
    user_name: str | None


def interaction_facts(interaction: discord.Interaction) -> InteractionFacts:
    """Read the facts out of a discord.py interaction (no I/O)."""
    channel = interaction.channel
    parent = channel.parent_id if isinstance(channel, discord.Thread) else None
    return InteractionFacts(
        channel_id=str(interaction.channel_id),
        parent_channel_id=str(parent) if parent is not None else None,
        guild_id=str(interaction.guild_id) if interaction.guild_id is not None else None,
        user_id=str(interaction.user.id),
        user_name=interaction.user.name,
    )


def inbound_from_interaction(
    facts: InteractionFacts, *, key: str, spec: CommandSpec, argument: str
) -> InboundMessage:
    """The runner's view of a slash command: the text `/name argument`, its replies going to
    the interaction `key` names."""
    parent = facts.parent_channel_id
    chat = ChatRef(
        platform=PLATFORM,
        chat_id=parent or facts.channel_id,
        thread_id=facts.channel_id if parent else None,
        reply_to_message_id=key,
    )
    return InboundMessage(
        chat=chat,
        user_id=facts.user_id,
        user_name=facts.user_name,
        text=f"/{spec.name} {argument.strip()}".strip(),
        is_direct=facts.guild_id is None,
        message_id=key,
    )


def status_embed(text: str) -> discord.Embed:
    """`/status` as an embed: the first line is the title, `Name: value` lines are fields."""
    lines = [line for line in text.splitlines() if line.strip()]
    embed = discord.Embed(title=(lines[0] if lines else "Status")[:256], colour=_EMBED_COLOUR)
    loose: list[str] = []
    for line in lines[1:]:
        name, sep, value = line.partition(": ")
        if sep and value and len(embed.fields) < 25:
            embed.add_field(name=name[:256], value=value[:1024], inline=False)
        else:
            loose.append(line)
    if loose:
        embed.description = "\n".join(loose)[:4096]
    return embed


def _has_fields(text: str) -> bool:
    """Status-shaped: a title line and at least two `Name: value` lines (not, say, a refusal)."""
    return sum(1 for line in text.splitlines()[1:] if ": " in line) >= 2


@dataclass(slots=True)
class _Pending:
    interaction: discord.Interaction
    command: str
    opened_at: float
    original_id: str | None = None
    """The deferred response's message id, once the first reply piece replaced "thinking…"."""


class InteractionReplies:
    """Interactions waiting for the runner's reply: `send` and `edit` of their chat go here."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._clock = clock

    def open(self, interaction: discord.Interaction, command: str) -> str:
        """Remember a deferred interaction; returns the key its replies carry."""
        self._forget_expired()
        key = f"{INTERACTION_PREFIX}{interaction.id}"
        self._pending[key] = _Pending(interaction, command, self._clock())
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)
        return key

    def owns(self, chat: ChatRef) -> bool:
        """Whether a reply to `chat` answers a pending interaction."""
        self._forget_expired()
        return (chat.reply_to_message_id or "") in self._pending

    async def send(self, chat: ChatRef, text: str) -> str:
        """The first piece replaces the deferred response; later ones are follow-ups."""
        pending = self._pending[chat.reply_to_message_id or ""]
        if pending.original_id is None:
            if pending.command == "status" and _has_fields(text):
                sent = await pending.interaction.edit_original_response(
                    content=None, embed=status_embed(text)
                )
            else:
                sent = await pending.interaction.edit_original_response(content=text)
            pending.original_id = str(sent.id)
            return pending.original_id
        followup = await pending.interaction.followup.send(text, wait=True)
        return str(followup.id)

    async def edit(self, chat: ChatRef, message_id: str, text: str) -> None:
        pending = self._pending[chat.reply_to_message_id or ""]
        if message_id == pending.original_id:
            await pending.interaction.edit_original_response(content=text)
        else:
            await pending.interaction.followup.edit_message(int(message_id), content=text)

    def _forget_expired(self) -> None:
        deadline = self._clock() - INTERACTION_TTL_S
        while self._pending and next(iter(self._pending.values())).opened_at < deadline:
            self._pending.popitem(last=False)


def _slash_command(spec: CommandSpec, on_command: OnCommand) -> app_commands.Command[Any, Any, Any]:
    """One table entry as an app command; its argument (if any) is one string option."""
    if not spec.argument:

        async def without_argument(interaction: discord.Interaction) -> None:
            await on_command(interaction, spec, "")

        callback: Any = without_argument
    elif spec.argument_required:

        async def with_required(interaction: discord.Interaction, argument: str) -> None:
            await on_command(interaction, spec, argument)

        callback = with_required
    else:

        async def with_optional(interaction: discord.Interaction, argument: str = "") -> None:
            await on_command(interaction, spec, argument)

        callback = with_optional
    if spec.argument:
        callback = app_commands.describe(argument=spec.argument_help or spec.argument)(callback)
        callback = app_commands.rename(argument=spec.argument)(callback)
    return app_commands.Command(name=spec.name, description=spec.summary, callback=callback)
