"""The pure decisions of steering: what intake does with a message mid-turn, the steer inbox,
`/busy`, edits, `/retry`'s choice of exchange and the compaction receipt's words."""

from __future__ import annotations

import asyncio

import pytest

from agent.access import Principal, TurnAccess
from agent.archive.anchors import Anchor
from agent.messages import assistant_message, system_message, tool_message, user_message
from gateway.commands import COMMANDS, Command, UnknownCommand, help_text, parse_command
from gateway.lanes import Item, Lane, SteerInbox
from gateway.receipts import Receipt, receipt_text
from gateway.steering import (
    Answered,
    BusyMode,
    busy_action,
    busy_text,
    edit_steer_text,
    edited_text,
    parse_busy_mode,
    runs_a_turn,
    steer_at_intake,
)
from gateway.take_back import last_exchange_start
from tests.gateway.harness import RecordingSink, inbound

ACCESS = TurnAccess(principal=Principal.operator(frozenset(), can_approve=False))
SUMMARY = {"role": "user", "content": "summary", "_kind": "summary"}


@pytest.mark.parametrize(
    ("mode", "text", "running", "expected"),
    [
        ("queue", "/stop", True, "stop"),
        ("queue", "/stop", False, "stop"),  # answered at once even when idle
        ("steer", "/busy interrupt", True, "set_mode"),
        ("queue", "more", True, "queue"),
        ("interrupt", "more", True, "interrupt"),
        ("steer", "more", True, "steer"),
        ("interrupt", "more", False, "queue"),  # nothing running: an ordinary message
        ("steer", "more", False, "queue"),
        ("interrupt", "/status", True, "queue"),  # commands act between turns
        ("steer", "/nonsense", True, "queue"),
    ],
)
def test_busy_action(mode: BusyMode, text: str, running: bool, expected: str) -> None:
    assert busy_action(mode=mode, command=parse_command(text), turn_running=running) == expected


def test_stop_is_never_steered_into_a_turn() -> None:
    """`/stop` cannot queue behind (or be fed to) the turn it stops, in any mode."""
    for mode in ("queue", "interrupt", "steer"):
        assert busy_action(mode=mode, command=Command(name="stop"), turn_running=True) == "stop"
    assert (
        busy_action(mode="steer", command=UnknownCommand(name="stopp"), turn_running=True)
        == "queue"
    )


def test_steer_inbox_hands_texts_once_and_returns_the_rest() -> None:
    inbox: SteerInbox[str] = SteerInbox()
    assert inbox.put("a", "item-a") and inbox.put("b", "item-b")
    assert inbox.take() == ["a", "b"]
    assert inbox.take() == []
    assert inbox.put("c", "item-c")
    assert inbox.close() == ["item-c"]
    assert inbox.joined == ["item-a", "item-b"]
    assert not inbox.put("d", "item-d")  # the turn is over


@pytest.mark.parametrize(
    ("argument", "reply_start", "mode"),
    [
        ("", "Busy mode: queue", "queue"),
        ("STEER", "Busy mode for this chat: steer", "steer"),
        (" interrupt ", "Busy mode for this chat: interrupt", "interrupt"),
        ("sideways", "Unknown busy mode", "queue"),
        ("x" * 10_000, "Unknown busy mode", "queue"),
    ],
)
def test_busy_text(argument: str, reply_start: str, mode: str) -> None:
    reply, chosen = busy_text(argument, "queue")
    assert reply.startswith(reply_start) and chosen == mode
    assert len(reply) < 300


def test_parse_busy_mode() -> None:
    assert [parse_busy_mode(m) for m in ("queue", "Steer", "", "steer now")] == [
        "queue",
        "steer",
        None,
        None,
    ]


def test_an_edit_into_a_command_is_not_a_command() -> None:
    """An edited message answered anew says it was edited, and `/new` typed by editing
    never runs as a command."""
    assert parse_command(edited_text("/new")) is None
    assert edit_steer_text("herons").endswith("\nherons")


def test_last_exchange_start_skips_summaries_and_tools() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
    transcript = [
        system_message("s"),
        user_message("one"),
        assistant_message("a1"),
        SUMMARY,
        user_message("two"),
        assistant_message(None, [call]),
        tool_message("c1", "terminal", "ok"),
        assistant_message("a2"),
    ]
    assert last_exchange_start(transcript) == 4
    assert last_exchange_start([system_message("s"), SUMMARY]) is None
    assert last_exchange_start([]) is None


def _receipt(**changes: object) -> Receipt:
    values: dict[str, object] = {
        "set_aside": 38,
        "anchors": (Anchor(first=12, last=30), Anchor(first=33, last=49)),
        "kept": 6,
        "pinned": 2,
        "tokens_saved": 41_200,
        "usd_saved": 0.1236,
        "first_lines": ("remember PELICAN-42", "note 1"),
    }
    values.update(changes)
    return Receipt(**values)  # type: ignore[arg-type]


def test_receipt_brief_says_what_was_set_aside_and_how_to_take_it_back() -> None:
    text = receipt_text(_receipt(), full=False)
    assert "38 earlier messages set aside ([#12–#49])" in text
    assert "2 standing instructions" in text and "newest 6 messages" in text
    assert "≈41,200 tokens (≈$0.12)" in text
    assert text.endswith("/bringback 12-49 brings them back · /uncompact undoes it")
    assert "PELICAN" not in text  # brief: no contents
    assert len(text) < 400


def test_receipt_full_lists_the_set_aside_messages() -> None:
    text = receipt_text(_receipt(), full=True)
    assert "• remember PELICAN-42" in text and "• note 1" in text


def test_receipt_without_price_or_pins() -> None:
    text = receipt_text(_receipt(usd_saved=None, pinned=0, tokens_saved=-5), full=False)
    assert "$" not in text and "standing" not in text and "≈0 tokens" in text


def test_new_commands_are_in_the_one_table_and_help() -> None:
    names = {spec.name for spec in COMMANDS}
    assert {"stop", "retry", "undo", "busy", "bringback", "uncompact"} <= names
    shown = help_text()
    for name in ("stop", "retry", "undo", "busy", "bringback", "uncompact"):
        assert f"/{name}" in shown


def test_runs_a_turn() -> None:
    """`/stop` can stop an ordinary message's turn and a `/retry` (it runs one), not `/status`."""
    assert runs_a_turn("hello") and runs_a_turn("/retry") and runs_a_turn("/ 2")
    assert not runs_a_turn("/status") and not runs_a_turn("/nonsense")


async def test_stop_cancels_a_running_retry_and_answers_at_once() -> None:
    """Intake: `/stop` while a `/retry` turn runs cancels its task and is answered itself."""
    lane: Lane[str] = Lane()
    running: Item[str] = Item(message=inbound("/retry"), sink=RecordingSink(), access=ACCESS)
    task = asyncio.create_task(asyncio.sleep(30))
    lane.current = (running, task)  # type: ignore[assignment]
    stop: Item[str] = Item(message=inbound("/stop"), sink=RecordingSink(), access=ACCESS)
    answer = steer_at_intake(lane, stop, mode="queue")
    assert isinstance(answer, Answered) and answer.command == "stop"
    assert answer.reply.startswith("⏹️ Stopped")
    await asyncio.wait({task})
    assert task.cancelled()
    assert lane.queue.empty()
