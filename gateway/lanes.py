"""What the runner keeps per conversation: a lane (a queue worked by one task) and its items.

An item is one inbound message on its way to a turn; while a chat's turn of the agent runs, its
item holds a `SteerInbox` for what the user says meanwhile (`gateway.steering`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from agent.access import TurnAccess
from gateway.platforms.base import InboundMessage
from gateway.reply import ReplySink

if TYPE_CHECKING:
    from agent.messages import ChatMessage
    from agent.turn_options import TurnOptions

__all__ = ["Item", "Lane", "SteerInbox", "finish_by"]

T = TypeVar("T")
Outcome = TypeVar("Outcome")
"""What the lane's turns produce (`gateway.run.TurnOutcome`)."""


class SteerInbox(Generic[T]):
    """What the user said while one turn runs, waiting for that turn's next model call.

    `put` while open; `take` hands the texts to the turn (their items joined it); `close` at
    the end of the turn returns the items the turn never took (answered as turns of their own).
    """

    def __init__(self) -> None:
        self._waiting: list[tuple[str, T]] = []
        self.joined: list[T] = []
        """Items whose words the turn took: the turn's reply answers them."""
        self.open = True

    def put(self, text: str, item: T) -> bool:
        """Hand `text` to the running turn; False once the turn is over."""
        if not self.open:
            return False
        self._waiting.append((text, item))
        return True

    def take(self) -> list[str]:
        texts = [text for text, _ in self._waiting]
        self.joined.extend(item for _, item in self._waiting)
        self._waiting.clear()
        return texts

    def close(self) -> list[T]:
        self.open = False
        left = [item for _, item in self._waiting]
        self._waiting.clear()
        return left


@dataclass(slots=True)
class Item(Generic[Outcome]):
    message: InboundMessage
    sink: ReplySink
    access: TurnAccess
    done: asyncio.Future[Outcome] | None = None
    session_id: str | None = None
    """Set when the caller names the session (terminal, HTTP API); otherwise routed by chat."""
    serving: str | None = None
    """The session the item is being served on, once routed."""
    options: TurnOptions | None = None
    """The caller's per-turn overrides (the HTTP API's tools and pass-through fields)."""
    said: Sequence[ChatMessage] | None = None
    """The turn's new messages when they are more than `message.text` (the HTTP API's tool
    results); None: the message's text is the turn."""
    inbox: SteerInbox[Item[Outcome]] | None = None
    """While a chat's turn of the agent runs: what the user says to steer it."""


@dataclass(slots=True)
class Lane(Generic[Outcome]):
    queue: asyncio.Queue[Item[Outcome]] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None
    current: tuple[Item[Outcome], asyncio.Task[Outcome]] | None = None
    """The item being handled, and the task handling it (what `interrupt` cancels)."""


async def finish_by(deadline: float, tasks: Sequence[asyncio.Task[None]]) -> None:
    """Wait for `tasks` (lane workers at shutdown, or what settles after them) until `deadline`
    on the loop's clock, then cancel what is left and let it unwind."""
    if not tasks:
        return
    left = max(0.0, deadline - asyncio.get_running_loop().time())
    _, pending = await asyncio.wait(tasks, timeout=left)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
