"""The user steers from the chat, end to end: real python-telegram-bot and discord.py against
their fakes, the runner, a real Runtime on FakeLLM and SQLite. Each behaviour on both platforms.

Contracts: Anthropic Messages API (docs.anthropic.com/en/api/messages): user and assistant turns
alternate, every `tool_use` is answered by a `tool_result`. Bot API (core.telegram.org/bots/api):
`edited_message` carries the edited message's id. "Archived, never deleted": every row stays in
`hermes sessions show --all` (`cli.sessions_cmd.sessions_show(include_archived=True)`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent.turn import INTERRUPTED_MARK
from cli.sessions_cmd import sessions_show
from gateway.receipts import NOTHING_TO_UNDO
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import (
    is_summary_request,
    make_config,
    request_texts,
    start_runtime,
    summary_responder,
)
from tests.gateway.platform_drivers import PlatformDriver, TelegramDriver, wait_until
from tests.integration.test_gateway_chat_platforms import (
    Gateway,
    _reply,
    driver,
    fake_telegram,
    gateway,
    llm,
    patch_discord,
)
from tests.waits import WAIT_S

__all__ = ["driver", "fake_telegram", "gateway", "llm", "patch_discord"]  # fixtures

SLOW = " ".join(f"word{n}." for n in range(60))


def _roles_alternate(body: dict[str, Any] | None) -> bool:
    assert body is not None
    roles = [m["role"] for m in body["messages"]]
    return all(a != b for a, b in zip(roles, roles[1:], strict=False))


async def _rows_once(runner: GatewayRunner, platform: str, count: int) -> list[dict[str, Any]]:
    """The chat's rows once there are `count` of them: a streamed reply can be on screen a
    moment before its turn has stored it."""
    async with asyncio.timeout(WAIT_S):
        while len(rows := await _rows(runner, platform)) < count:  # noqa: ASYNC110 - the store has no event to wait on
            await asyncio.sleep(0.02)
    return rows


async def _rows(runner: GatewayRunner, platform: str) -> list[dict[str, Any]]:
    """Every stored row of the chat's session, as `hermes sessions show --all --json` lists them."""
    sessions = await runner.store.sessions.list_sessions(platform=platform)
    assert len(sessions) == 1
    shown = await sessions_show(runner.store, sessions[0].id, include_archived=True, as_json=True)
    rows: list[dict[str, Any]] = json.loads(shown)
    return sorted(rows, key=lambda r: int(r["id"]))  # as said (shown in position order)


def _chat_requests(llm: FakeLLM) -> list[dict[str, Any]]:
    return [r.json for r in llm.requests if r.json is not None and not is_summary_request(r.json)]


async def test_stop_mid_stream_keeps_what_arrived_and_the_next_message_works(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """/stop is answered while the turn runs (it does not queue behind it): what streamed is
    kept, stored marked interrupted, shown marked stopped; the next message is answered and
    its request alternates roles."""
    llm.script(Turn(text=SLOW, event_delay_s=0.05), Turn(text="second answer."))
    async with gateway() as runner:
        await driver.say("alice", "tell me a long story")
        await _reply(driver, "alice", 1, "")  # the first streamed piece is shown
        await driver.say("alice", "/stop")
        await wait_until(
            lambda: any(r.startswith("⏹️ Stopped") for r in driver.replies("alice")),
            what="the /stop answer",
        )
        await wait_until(
            lambda: driver.replies("alice")[0].endswith("(stopped)"), what="the partial, marked"
        )
        await driver.say("alice", "go on")
        await _reply(driver, "alice", 3, "second answer.")
        rows = await _rows_once(runner, driver.platform, 5)
    partial = driver.replies("alice")[0]
    assert partial.startswith("word0.") and "word59." not in partial
    active = [(r["role"], r["content"]) for r in rows if r["active"]]
    assert [role for role, _ in active] == ["system", "user", "assistant", "user", "assistant"]
    assert active[2][1].startswith("word0.") and active[2][1].endswith(INTERRUPTED_MARK)
    assert "/stop" not in json.dumps(rows)  # answered at the door, never part of the session
    assert len(llm.requests) == 2 and _roles_alternate(llm.requests[-1].json)


async def test_stop_with_nothing_running_says_so(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    async with gateway():
        await driver.say("alice", "/stop")
        replies = await _reply(driver, "alice", 1)
    assert replies == ["Nothing to stop: no reply is being written in this chat."]
    assert llm.requests == []


async def test_retry_and_undo_archive_and_never_delete(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """/retry answers the last message again, the replaced answer archived; /undo sets the
    last exchange aside. Every row stays, found with `sessions show --all`."""
    llm.script(Turn(text="first answer."), Turn(text="second try."))
    async with gateway() as runner:
        await driver.say("alice", "what is a pelican?")
        await _reply(driver, "alice", 1, "first answer.")
        await driver.say("alice", "/retry")
        await _reply(driver, "alice", 2, "second try.")
        retried = await _rows_once(runner, driver.platform, 5)
        await driver.say("alice", "/undo")
        undone_reply = (await _reply(driver, "alice", 3))[2]
        undone = await _rows(runner, driver.platform)
    second = _chat_requests(llm)[1]
    assert request_texts(second)[-1] == "what is a pelican?"
    assert "first answer." not in request_texts(second)  # replaced, not shown to the model
    assert [(r["content"], r["active"]) for r in retried[1:]] == [
        ("what is a pelican?", False),
        ("first answer.", False),
        ("what is a pelican?", True),
        ("second try.", True),
    ]
    assert undone_reply.startswith("↩️ Undone")
    assert [r["active"] for r in undone] == [True, False, False, False, False]
    assert [r["content"] for r in undone] == [r["content"] for r in retried]  # nothing deleted


async def test_undo_on_an_empty_chat_says_so(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    async with gateway():
        await driver.say("alice", "/undo")
        replies = await _reply(driver, "alice", 1)
    assert replies[0].startswith("Nothing to undo")


async def test_busy_interrupt_stops_the_running_turn_and_answers_the_new_message(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """gateway.busy: interrupt. The slow answer is cut, kept marked; the new message is answered
    next, and its request holds the cut answer between the two user messages."""
    llm.script(Turn(text=SLOW, event_delay_s=0.05), Turn(text="answer to the second."))
    async with gateway(gateway={"busy": "interrupt"}):
        await driver.say("alice", "tell me a long story")
        await _reply(driver, "alice", 1, "")
        await driver.say("alice", "actually, just the weather")
        await wait_until(
            lambda: driver.replies("alice")[-1] == "answer to the second.",
            what="the second answer",
        )
    texts = request_texts(llm.requests[1].json)
    assert texts[-1] == "actually, just the weather"
    assert texts[-2].endswith(INTERRUPTED_MARK) and texts[-3] == "tell me a long story"
    assert driver.replies("alice")[0].endswith("(stopped)")
    assert _roles_alternate(llm.requests[1].json)


async def test_busy_steer_joins_the_running_turn_at_its_next_model_call(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """gateway.busy: steer. A message sent while the model's first call runs is stored after
    the tool result and sent with the second call; it gets no turn of its own."""
    search = ToolCallSpec("session_search", json.dumps({"query": "pelican"}))
    llm.script(Turn(tool_calls=[search], delay_s=0.8), Turn(text="steered answer."))
    tools = {"enabled": ["session_search"]}
    async with gateway(gateway={"busy": "steer"}, tools=tools) as runner:
        await driver.say("alice", "search my notes for pelicans")
        await llm.wait_requests(1)
        await driver.say("alice", "only from last week")
        await _reply(driver, "alice", 1, "steered answer.")
        rows = await _rows_once(runner, driver.platform, 6)
    assert len(llm.requests) == 2
    texts = request_texts(llm.requests[1].json)
    assert texts[-1] == "only from last week"
    roles = [r["role"] for r in rows]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert rows[4]["content"] == "only from last week"
    assert driver.replies("alice") == ["steered answer."]


async def test_busy_steer_after_the_last_call_is_answered_as_its_own_turn(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """A steer that arrives while the model writes its final answer has no next call to join:
    it is answered next, as a turn of its own."""
    llm.script(Turn(text="first.", delay_s=0.6), Turn(text="second."))
    async with gateway(gateway={"busy": "steer"}):
        await driver.say("alice", "one")
        await llm.wait_requests(1)
        await driver.say("alice", "two")
        replies = await _reply(driver, "alice", 2, "second.")
    assert replies == ["first.", "second."]
    assert request_texts(llm.requests[1].json)[-3:] == ["one", "first.", "two"]


async def test_busy_command_switches_one_chat(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """/busy shows the mode; /busy steer changes it for this chat; nonsense is refused."""
    async with gateway():
        await driver.say("alice", "/busy")
        await _reply(driver, "alice", 1)
        await driver.say("alice", "/busy steer")
        await _reply(driver, "alice", 2)
        await driver.say("alice", "/busy sideways")
        replies = await _reply(driver, "alice", 3)
    assert replies[0].startswith("Busy mode: queue")
    assert replies[1].startswith("Busy mode for this chat: steer")
    assert replies[2].startswith("Unknown busy mode")


async def test_telegram_edit_while_running_steers(
    fake_telegram: FakeTelegram,
    llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Editing the message the running turn answers steers it (even in the default queue
    mode); a later edit of an answered message is answered as a new message saying so.
    (Telegram only: Discord's message edits are not wired.)"""
    driver = TelegramDriver(fake_telegram)
    search = ToolCallSpec("session_search", json.dumps({"query": "pelican"}))
    llm.script(
        Turn(tool_calls=[search], delay_s=0.8), Turn(text="steered answer."), Turn(text="again.")
    )
    alice = TelegramDriver.IDS["alice"]
    tools = {"enabled": ["session_search"]}
    config = make_config(llm, tmp_path / "state.db", gateway=driver.gateway_config(), tools=tools)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime, [driver.adapter()])
        await runner.start()
        try:
            await driver.say("alice", "search for pelicans")
            first = fake_telegram.last_pushed_id
            await llm.wait_requests(1)
            await fake_telegram.push_edit(first, "search for herons")
            await _reply(driver, "alice", 1, "steered answer.")
            await fake_telegram.push_edit(first, "search for storks")
            await _reply(driver, "alice", 2, "again.")
        finally:
            await runner.stop()
    assert alice == fake_telegram.sent[0].chat_id
    steered = request_texts(llm.requests[1].json)[-1]
    assert steered.endswith("search for herons") and "edited" in steered
    assert request_texts(llm.requests[2].json)[-1] == "[edited message] search for storks"


async def test_compaction_receipt_bring_back_and_undo(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """A compaction in the chat gets one receipt; /bringback puts the archived rows' words into
    the next request; /uncompact makes the very same rows active again in one transaction; a
    second /uncompact says there is nothing to undo."""
    llm.responder = summary_responder()
    sections = {
        "model": {"context_length": 4000},
        "compression": {"protect_first_n": 1, "protect_last_n": 2},
    }
    async with gateway(**sections) as runner:
        await driver.say("alice", "remember PELICAN-42 " + "words " * 100)
        await _reply(driver, "alice", 1, "words")
        for n in range(1, 4):
            await driver.say("alice", f"note {n} " + "words " * 100)
            await _reply(driver, "alice", n + 1, "words")
        before = [r["id"] for r in await _rows_once(runner, driver.platform, 9) if r["active"]]
        alice_session = (await runner.store.sessions.list_sessions())[0].id
        await driver.say("alice", "/compress")
        receipt = (await _reply(driver, "alice", 5))[4]
        compacted = await _rows(runner, driver.platform)
        await driver.say("alice", "/bringback")
        brought = (await _reply(driver, "alice", 6))[5]
        await driver.say("alice", "what was the code?")
        await _reply(driver, "alice", 7, "what was the code?")
        asked = _chat_requests(llm)[-1]
        await driver.say("alice", "/uncompact")
        undone = (await _reply(driver, "alice", 8))[7]
        restored = await _rows(runner, driver.platform)
        await driver.say("alice", "/uncompact")
        again = (await _reply(driver, "alice", 9))[8]
        await driver.say("bob", f"/bringback {before[1]}-{before[-1]}")  # Alice's rows
        refused = (await _reply(driver, "bob", 1))[0]
        bob_rows = [
            r
            for s in await runner.store.sessions.list_sessions()
            if s.id != alice_session
            for r in json.loads(
                await sessions_show(runner.store, s.id, include_archived=True, as_json=True)
            )
        ]
    assert receipt.count("🗜️") == 1 and "set aside" in receipt and "/uncompact" in receipt
    assert not any("PELICAN-42" in r["content"] for r in compacted if r["active"])
    assert brought.startswith("📥 Brought")
    assert any("PELICAN-42" in t for t in request_texts(asked))
    assert undone.startswith("↩️ Compaction undone")
    active = [r["id"] for r in restored if r["active"]]
    assert active[: len(before)] == before  # the same rows, in their order, not copies
    assert len(restored) == len(compacted) + 4  # /bringback's 2 and a turn's 2: none deleted
    assert again == NOTHING_TO_UNDO
    assert refused.startswith("Nothing in [#")  # another chat's rows are not this chat's
    assert "PELICAN-42" not in json.dumps(bob_rows)


async def test_an_automatic_compaction_in_a_chat_gets_exactly_one_receipt(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """Hygiene compacts a chat that grew past 85% of the window before the next turn: the
    user gets the reply, then one receipt (no separate notice before it)."""
    llm.responder = summary_responder()
    sections = {
        "model": {"context_length": 4000},
        "compression": {"protect_first_n": 1, "protect_last_n": 2},
    }
    async with gateway(**sections) as runner:
        for n in range(12):
            await driver.say("alice", f"note {n} " + "words " * 100)
            await wait_until(
                lambda n=n: sum(r.endswith("words") for r in driver.replies("alice")) > n,
                what=f"reply {n}",
            )
            if (await runner.store.sessions.list_sessions(platform=driver.platform))[0].compactions:
                break
        await wait_until(
            lambda: any(r.startswith("🗜️ Compacted") for r in driver.replies("alice")),
            what="a receipt",
        )
        info = (await runner.store.sessions.list_sessions(platform=driver.platform))[0]
    receipts = [r for r in driver.replies("alice") if "🗜️" in r]
    assert len(receipts) == 1 and info.compactions == 1
    assert receipts[0].endswith("/uncompact undoes it")
    assert driver.replies("alice")[-1] == receipts[0]  # after the reply, never before it


async def _until_a_receipt(driver: PlatformDriver, runner: GatewayRunner) -> int:
    """Alice writes long notes (the first names PELICAN-42) until hygiene compacts; returns
    how many messages the bot had sent once the receipt arrived."""
    for n in range(12):
        await driver.say(
            "alice", ("remember PELICAN-42 " if n == 0 else f"note {n} ") + "words " * 100
        )
        await wait_until(
            lambda n=n: sum(r.endswith("words") for r in driver.replies("alice")) > n,
            what=f"reply {n}",
        )
        if (await runner.store.sessions.list_sessions(platform=driver.platform))[0].compactions:
            break
    await wait_until(
        lambda: any(r.startswith("🗜️ Compacted") for r in driver.replies("alice")),
        what="a receipt",
    )
    return len(driver.replies("alice"))


SMALL_WINDOW = {
    "model": {"context_length": 4000},
    "compression": {"protect_first_n": 1, "protect_last_n": 2},
}


async def test_the_receipts_bring_back_button_feeds_the_next_request(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """The receipt's "Bring back" button (Telegram inline keyboard, Discord button) puts the
    archived words into the next request. "Undo compaction" right after it would not fit the
    window any more: refused with a sentence, nothing changed.

    The press comes before the next question on purpose: that question's turn may compact
    again (the brought-back rows fill the small window, and whether it does is timing), and
    the undo would then be of that newer compaction, a different claim (CI saw it fit)."""
    llm.responder = summary_responder()
    async with gateway(**SMALL_WINDOW) as runner:
        count = await _until_a_receipt(driver, runner)
        await driver.press("alice", "📥 Bring back")
        brought = (await _reply(driver, "alice", count + 1))[count]
        rows = await _rows(runner, driver.platform)
        await driver.press("alice", "↩️ Undo compaction")
        refused = (await _reply(driver, "alice", count + 2))[count + 1]
        after = await _rows(runner, driver.platform)
        await driver.say("alice", "what was the code?")
        await _reply(driver, "alice", count + 3, "what was the code?")
        asked = _chat_requests(llm)[-1]
    assert brought.startswith("📥 Brought")
    assert refused.startswith("Undoing the last compaction would not fit")
    assert after == rows
    assert any("PELICAN-42" in t for t in request_texts(asked))


async def test_the_receipts_undo_button_restores_the_rows_once(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """ "Undo compaction" makes the archived rows themselves active again (one transaction);
    pressed again, it says there is nothing to undo."""
    llm.responder = summary_responder()
    async with gateway(**SMALL_WINDOW) as runner:
        count = await _until_a_receipt(driver, runner)
        compacted = await _rows(runner, driver.platform)
        await driver.press("alice", "↩️ Undo compaction")
        undone = (await _reply(driver, "alice", count + 1))[count]
        await driver.press("alice", "↩️ Undo compaction")
        again = (await _reply(driver, "alice", count + 2))[count + 1]
        rows = await _rows(runner, driver.platform)
    assert undone.startswith("↩️ Compaction undone")
    assert again == NOTHING_TO_UNDO
    assert [r["id"] for r in rows] == [r["id"] for r in compacted]  # none added, none deleted
    pelican = next(r for r in rows if "PELICAN-42" in r["content"] and r["role"] == "user")
    assert (
        pelican["active"] and not next(r for r in compacted if r["id"] == pelican["id"])["active"]
    )
    assert not any(r["active"] for r in rows if r["kind"] == "summary")
