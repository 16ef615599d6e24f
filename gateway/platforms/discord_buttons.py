"""Discord buttons that stand for a chat command (the compaction receipt's "Bring back" and
"Undo compaction"): a `discord.ui.View` whose buttons carry the command, and a press turned back
into an ordinary inbound message from the person who pressed.

Discord API (discord.com/developers/docs/interactions/message-components): a button's
`custom_id` is 1-100 characters; a press is an INTERACTION_CREATE of type 3 that must be
acknowledged within three seconds; a DEFERRED_UPDATE_MESSAGE (type 6) acknowledges it without
changing the message, and the command's answer then arrives as an ordinary message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import discord
import structlog

from gateway.platforms.base import ChatRef, InboundMessage

__all__ = ["CommandButtons", "inbound_from_press"]

log = structlog.get_logger(__name__)

COMMAND_ID_PREFIX = "cmd:"
MAX_CUSTOM_ID = 100
_THREAD_TYPES = frozenset(
    {
        discord.ChannelType.public_thread,
        discord.ChannelType.private_thread,
        discord.ChannelType.news_thread,
    }
)


def inbound_from_press(interaction: discord.Interaction, command: str) -> InboundMessage | None:
    """A press, as `command` typed by the presser in the button's channel (or thread)."""
    channel = interaction.channel
    if channel is None or interaction.user.bot:
        return None
    is_direct = interaction.guild_id is None
    parent = getattr(channel, "parent_id", None)
    if getattr(channel, "type", None) in _THREAD_TYPES and parent is not None:
        chat = ChatRef(platform="discord", chat_id=str(parent), thread_id=str(channel.id))
    else:
        chat = ChatRef(platform="discord", chat_id=str(channel.id))
    return InboundMessage(
        chat=chat,
        user_id=str(interaction.user.id),
        user_name=interaction.user.name,
        text=command,
        is_direct=is_direct,
    )


class CommandButtons(discord.ui.View):
    """One row of (label, command) buttons; a press is delivered as the command."""

    def __init__(
        self,
        buttons: Sequence[tuple[str, str]],
        deliver: Callable[[InboundMessage], Awaitable[None]],
    ) -> None:
        super().__init__(timeout=None)
        self._deliver = deliver
        for label, command in buttons:
            custom_id = COMMAND_ID_PREFIX + command
            if len(custom_id) > MAX_CUSTOM_ID:
                continue  # it can still be typed
            button: discord.ui.Button[CommandButtons] = discord.ui.Button(
                label=label[:80], style=discord.ButtonStyle.secondary, custom_id=custom_id
            )
            button.callback = self._on_press(command)  # type: ignore[method-assign,assignment]
            self.add_item(button)

    def _on_press(self, command: str) -> Callable[[discord.Interaction], Coroutine[Any, Any, None]]:
        async def pressed(interaction: discord.Interaction) -> None:
            await interaction.response.defer()
            inbound = inbound_from_press(interaction, command)
            log.info("command_button_pressed", command=command.split(" ", 1)[0])
            if inbound is not None:
                await self._deliver(inbound)

        return pressed
