"""`/uncompact` through the runner on the Telegram and Discord fakes (real python-telegram-bot
and discord.py, a real Runtime on FakeLLM and SQLite): it puts back what a compaction set
aside and nothing the user took back with `/retry` or `/undo`; it refuses, in a sentence, the
compactions it cannot undo; and it never reaches another person's session.

"Set aside, never deleted, and why": every row stays in `hermes sessions show --all`
(`cli.sessions_cmd`), each archived one marked with its reason (`messages.archived_by`).
"""

from __future__ import annotations

import json
from typing import Any

from cli.sessions_cmd import sessions_show
from gateway.receipts import NOTHING_TO_UNDO
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM
from tests.gateway.harness import summary_responder
from tests.gateway.platform_drivers import PlatformDriver
from tests.integration.test_gateway_chat_platforms import (
    Gateway,
    _reply,
    driver,
    fake_telegram,
    gateway,
    llm,
    patch_discord,
)
from tests.integration.test_gateway_steering import _rows, _rows_once

__all__ = ["driver", "fake_telegram", "gateway", "llm", "patch_discord"]  # fixtures

SECTIONS: dict[str, Any] = {
    "model": {"context_length": 4000},
    "compression": {"protect_first_n": 1, "protect_last_n": 2},
}


async def _four_notes_then_compress(driver: PlatformDriver, runner: GatewayRunner) -> str:
    """Alice writes four long notes (the first names PELICAN-42) and runs /compress; returns
    the compaction's answer."""
    for n in range(4):
        said = ("remember PELICAN-42 " if n == 0 else f"note {n} ") + "words " * 100
        await driver.say("alice", said)
        await _reply(driver, "alice", n + 1, "words")
    await _rows_once(runner, driver.platform, 9)
    await driver.say("alice", "/compress")
    return (await _reply(driver, "alice", 5))[4]


async def test_uncompact_leaves_aside_what_undo_took_back(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """After a compaction, /undo takes back the exchange the compaction had kept; /uncompact
    then restores the compacted rows but not that exchange. `sessions show --all` tells the
    reasons apart: compaction, undo, and the summary set aside by /uncompact."""
    llm.responder = summary_responder()
    async with gateway(**SECTIONS) as runner:
        compacted = await _four_notes_then_compress(driver, runner)
        await driver.say("alice", "/undo")
        undone = (await _reply(driver, "alice", 6))[5]
        await driver.say("alice", "/uncompact")
        restored = (await _reply(driver, "alice", 7))[6]
        rows = await _rows(runner, driver.platform)
        session_id = (await runner.store.sessions.list_sessions(platform=driver.platform))[0].id
        shown = await sessions_show(runner.store, session_id, include_archived=True)
    assert compacted.startswith("Compacted:") and undone.startswith("↩️ Undone")
    assert restored.startswith("↩️ Compaction undone")
    note3 = next(r for r in rows if r["content"].startswith("note 3"))
    taken_back = [r for r in rows if r["archived_by"] == "undo"]
    assert len(taken_back) == 2 and note3 in taken_back  # note 3 and its answer
    assert not any(r["active"] for r in taken_back)
    pelican = next(r for r in rows if r["content"].startswith("remember PELICAN-42"))
    assert pelican["active"] and pelican["archived_by"] is None
    summaries = [r for r in rows if r["kind"] == "summary"]
    assert summaries and all(r["archived_by"] == "uncompact" for r in summaries)
    assert all(r["compacted"] == (r["archived_by"] == "compaction") for r in rows)
    assert "[archived: undo]" in shown and "[summary, archived: uncompact]" in shown


async def test_a_rotating_compaction_is_refused_with_a_sentence(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """With `compression.in_place: false` a compaction moves the chat into a new session:
    /uncompact there says it cannot be undone and where the earlier messages are; nothing
    changes in either session."""
    llm.responder = summary_responder()
    rotating = {**SECTIONS, "compression": {**SECTIONS["compression"], "in_place": False}}
    async with gateway(**rotating) as runner:
        await _four_notes_then_compress(driver, runner)
        sessions = await runner.store.sessions.list_sessions(platform=driver.platform)
        child = next(s for s in sessions if s.parent_session_id is not None)
        parent = next(s for s in sessions if s.id == child.parent_session_id)
        before = {s.id: await _all_rows(runner, s.id) for s in sessions}
        await driver.say("alice", "/uncompact")
        refused = (await _reply(driver, "alice", 6))[5]
        after = {s.id: await _all_rows(runner, s.id) for s in sessions}
    assert parent.end_reason == "compression"
    assert refused.startswith("That compaction can't be undone")
    assert parent.id in refused and "Nothing changed" in refused
    assert after == before


async def test_another_person_cannot_uncompact_or_bring_back_alices_session(
    driver: PlatformDriver, gateway: Gateway, llm: FakeLLM
) -> None:
    """Bob, in his own chat, cannot reach Alice's compacted session: /resume of her id is an
    unknown session, /uncompact finds nothing of his to undo, /bringback of her range finds
    nothing set aside in his conversation, and her rows are unchanged and unseen by him."""
    llm.responder = summary_responder()
    async with gateway(**SECTIONS) as runner:
        await _four_notes_then_compress(driver, runner)
        alice = (await runner.store.sessions.list_sessions(platform=driver.platform))[0].id
        alice_rows = await _all_rows(runner, alice)
        archived = [r["id"] for r in alice_rows if not r["active"]]
        await driver.say("bob", f"/resume {alice}")
        await driver.say("bob", "/uncompact")
        await driver.say("bob", f"/bringback {archived[0]}-{archived[-1]}")
        replies = await _reply(driver, "bob", 3)
        after = await _all_rows(runner, alice)
        bobs = [
            r
            for s in await runner.store.sessions.list_sessions()
            if s.id != alice
            for r in await _all_rows(runner, s.id)
        ]
    assert replies[0].startswith("No session") and replies[1] == NOTHING_TO_UNDO
    assert replies[2].startswith("Nothing in [#")
    assert after == alice_rows
    assert "PELICAN-42" not in json.dumps(bobs) + "".join(replies)


async def _all_rows(runner: GatewayRunner, session_id: str) -> list[dict[str, Any]]:
    shown = await sessions_show(runner.store, session_id, include_archived=True, as_json=True)
    rows: list[dict[str, Any]] = json.loads(shown)
    return rows
