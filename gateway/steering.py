"""The user steers a running turn: `/stop`, and what a message sent mid-turn does (`gateway.busy`).

Both are decided at intake, before a message would queue behind the turn it is about: `/stop`
cancels the chat's running turn (as Esc does in the terminal); in `interrupt` mode a new message
stops the running turn and is answered next; in `steer` mode it joins the running turn as a user
message before its next model call (`SteerInbox`), and is answered as a turn of its own only if
that turn makes no further call. `queue` (the default) waits, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import (
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    assert_never,
    runtime_checkable,
)

from gateway.commands import Command, UnknownCommand, parse_command
from gateway.lanes import Item, Lane, SteerInbox
from gateway.platforms.base import InboundMessage
from gateway.reply import ReplySink

__all__ = [
    "BUSY_MODES",
    "STEERED_PLATFORMS",
    "BusyAction",
    "BusyMode",
    "Answered",
    "Steering",
    "Stoppable",
    "after_steering",
    "answer_now",
    "steer_at_intake",
    "steer_inbox",
    "busy_action",
    "busy_text",
    "edit_steer_text",
    "edited_text",
    "parse_busy_mode",
    "runs_a_turn",
    "stop_text",
    "stopped",
]

BusyMode: TypeAlias = Literal["queue", "interrupt", "steer"]
BUSY_MODES: tuple[BusyMode, ...] = ("queue", "interrupt", "steer")
BusyAction: TypeAlias = Literal["queue", "stop", "interrupt", "steer", "set_mode"]
"""What intake does with a message: queue it (the default), answer `/stop` or `/busy` at once,
stop the running turn and queue the message, or hand it to the running turn."""

Outcome = TypeVar("Outcome")


def busy_action(
    *, mode: BusyMode, command: Command | UnknownCommand | None, turn_running: bool
) -> BusyAction:
    """Pure: what intake does with one message, given the chat's mode and whether a turn of
    the agent (not a command) is running in the chat now. Commands other than `/stop` and
    `/busy` always queue: they act between turns."""
    if isinstance(command, Command) and command.name == "stop":
        return "stop"
    if isinstance(command, Command) and command.name == "busy":
        return "set_mode"
    if command is not None or not turn_running:
        return "queue"
    match mode:
        case "queue":
            return "queue"
        case "interrupt":
            return "interrupt"
        case "steer":
            return "steer"
        case unreachable:
            assert_never(unreachable)


def edit_steer_text(text: str) -> str:
    """What the running turn hears when the user edits the message it is answering."""
    return f"[I edited my message above while you were answering; it now reads:]\n{text}"


def edited_text(text: str) -> str:
    """An edit answered as a new message (its turn is over, or it is an older message): it
    says so, and an edit into `/something` is never run as a command."""
    return f"[edited message] {text}"


def _same_message(running: InboundMessage, edit: InboundMessage) -> bool:
    return (
        running.message_id is not None
        and running.message_id == edit.message_id
        and running.user_id == edit.user_id
        and running.chat == edit.chat
    )


def runs_a_turn(text: str) -> bool:
    """Whether a message is answered by a turn of the agent (an ordinary message, or
    `/retry`), which `/stop` can stop; other commands finish on their own."""
    command = parse_command(text)
    return command is None or (isinstance(command, Command) and command.name == "retry")


def stop_text(*, stopped: bool) -> str:
    """The answer to `/stop`."""
    if stopped:
        return "⏹️ Stopped. What had arrived is kept; send your next message."
    return "Nothing to stop: no reply is being written in this chat."


def parse_busy_mode(argument: str) -> BusyMode | None:
    """`/busy steer` → "steer"; anything else (empty included) → None."""
    wanted = argument.strip().lower()
    for mode in BUSY_MODES:
        if wanted == mode:
            return mode
    return None


def busy_text(argument: str, current: BusyMode) -> tuple[str, BusyMode]:
    """The answer to `/busy [mode]`, and the chat's mode afterwards."""
    explained = {
        "queue": "a message sent while I am answering waits its turn",
        "interrupt": "a message sent while I am answering stops that answer and is answered instead",
        "steer": "a message sent while I am answering joins that answer before my next step",
    }
    if not argument.strip():
        return f"Busy mode: {current} ({explained[current]}). /busy queue|interrupt|steer", current
    mode = parse_busy_mode(argument)
    if mode is None:
        return (
            f"Unknown busy mode {argument.strip()[:40]!r}; use queue, interrupt or steer.",
            current,
        )
    return f"Busy mode for this chat: {mode} ({explained[mode]}).", mode


@runtime_checkable
class Stoppable(Protocol):
    """A reply sink that can show a stopped reply (what streamed, marked) and end its typing."""

    async def stopped(self) -> None: ...


STEERED_PLATFORMS: frozenset[str] = frozenset({"telegram", "discord"})
"""Chats where a message sent mid-turn may interrupt or steer it (an HTTP request or the
terminal's prompt never does: each waits for its own answer)."""
_ANSWERING: set[asyncio.Task[None]] = set()


async def stopped(sink: object) -> None:
    """A stopped turn's sink shows what streamed, marked, and stops its typing indicator."""
    if isinstance(sink, Stoppable):
        await sink.stopped()


def answer_now(sink: ReplySink, done: asyncio.Future[Outcome] | None, outcome: Outcome) -> None:
    """Answer a message at intake, without queueing it (`/stop`, `/busy`): the reply goes to
    `sink` in a task of its own, then `done` resolves with `outcome`."""

    async def answer() -> None:
        try:
            await sink.finish(getattr(outcome, "reply", ""))
        finally:
            if done is not None and not done.done():
                done.set_result(outcome)

    task = asyncio.create_task(answer(), name="answer-now")
    _ANSWERING.add(task)
    task.add_done_callback(_ANSWERING.discard)


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """Intake answered the message itself (`/stop`, `/busy`)."""

    reply: str
    command: str
    mode: BusyMode | None = None
    """`/busy MODE`: the chat's mode from now on."""


def steer_at_intake(lane: Lane[Outcome], item: Item[Outcome], *, mode: BusyMode) -> Answered | bool:
    """Carry out `busy_action` for a message arriving on `lane`: an answer to send at once,
    True when the running turn took the message, False to queue it (after stopping the
    running turn, in `interrupt` mode)."""
    current = lane.current
    turn = current if current and runs_a_turn(current[0].message.text) else None
    inbox = turn[0].inbox if turn else None
    if item.message.edited:
        text = item.message.text
        # Should the turn end before taking it, it is answered as an edited message.
        item.message = replace(item.message, text=edited_text(text))
        steers = turn is not None and _same_message(turn[0].message, item.message)
        return steers and inbox is not None and inbox.put(edit_steer_text(text), item)
    command = parse_command(item.message.text)
    match busy_action(mode=mode, command=command, turn_running=inbox is not None):
        case "stop":
            return Answered(
                reply=stop_text(stopped=turn is not None and turn[1].cancel()), command="stop"
            )
        case "set_mode":
            argument = command.argument if isinstance(command, Command) else ""
            reply, chosen = busy_text(argument, mode)
            return Answered(reply=reply, command="busy", mode=chosen)
        case "interrupt":
            if turn is not None:
                turn[1].cancel()
            return False
        case "steer":
            return inbox is not None and inbox.put(item.message.text, item)
        case "queue":
            return False
        case unreachable:
            assert_never(unreachable)


class Steering:
    """One runner's steering: each chat's `/busy` mode (this process only; the default is
    `gateway.busy`) and intake's decisions (`steer_at_intake`)."""

    def __init__(self, default: BusyMode) -> None:
        self.default = default
        self.modes: dict[str, BusyMode] = {}

    def intake(
        self,
        key: str,
        lane: Lane[Outcome],
        item: Item[Outcome],
        answered: Callable[[str, str], Outcome],
    ) -> bool:
        """True when intake took the message (answered it, or handed it to the running turn);
        False: queue it. `answered(reply, command)` builds the outcome of an answer."""
        answer = steer_at_intake(lane, item, mode=self.modes.get(key, self.default))
        if not isinstance(answer, Answered):
            return answer
        if answer.mode is not None:
            self.modes[key] = answer.mode
        answer_now(item.sink, item.done, answered(answer.reply, answer.command))
        return True


def steer_inbox(message: InboundMessage) -> SteerInbox[Item[Outcome]] | None:
    """A running turn's inbox, on the platforms where people steer (`STEERED_PLATFORMS`)."""
    return SteerInbox() if message.chat.platform in STEERED_PLATFORMS else None


def after_steering(
    lane: Lane[Outcome], item: Item[Outcome], outcome: Outcome
) -> list[Item[Outcome]]:
    """A turn ended: the messages it took are answered by its reply; those it never took go
    to the front of the queue, in order (returned, to be counted as waiting)."""
    if item.inbox is None:
        return []
    for joined in item.inbox.joined:
        if joined.done is not None and not joined.done.done():
            joined.done.set_result(outcome)
    left = item.inbox.close()
    behind = [lane.queue.get_nowait() for _ in range(lane.queue.qsize())]
    for waiting in [*left, *behind]:
        lane.queue.put_nowait(waiting)
    return left
