"""ElectedAdapter: of several workers on one store, exactly one polls Telegram or connects to the
Discord gateway, and another takes over when it steps down or loses its lock.

Bot API contract (core.telegram.org/bots/api#getupdates): only one getUpdates may be in flight
for a bot; a second one ends the first with 409 "Conflict: terminated by other getUpdates
request". FakeTelegram enforces that and records which worker (path tag) polled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import update

from agent.access import ApprovalRequest
from agent.errors import PlatformError
from gateway.election import ElectedAdapter
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.platforms.discord import DiscordAdapter
from gateway.platforms.telegram import TelegramAdapter
from state import SqlSessionStore
from state.models import LEASES
from tests.fakes.discord import FakeDiscord, patch_discord
from tests.fakes.telegram import FakeTelegram
from tests.state.fixtures import StoreTarget, pg_schema, store_target
from tests.waits import SLOW_WAIT_S, WAIT_S

__all__ = ["patch_discord", "pg_schema", "store_target"]

TTL_S = WAIT_S
"""A SQLite lease lapses only when its holder stalls past the shared wait bound. At 1 s, a renewal
held up past two thirds of a second on a loaded machine would hand leadership to the other worker
mid-test ("exactly one worker polls" then fails), and the deposed leader of the lost-lock test
would be back within 0.4 s, racing the follower for the row. The takeovers the tests want come
from a release (`stop`) or an expired row, not from the clock."""


class _Inbox:
    """A worker's intake: what reached it."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self._changed = asyncio.Condition()

    async def __call__(self, message: InboundMessage) -> None:
        async with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    async def wait_count(self, n: int) -> list[str]:
        async with asyncio.timeout(SLOW_WAIT_S), self._changed:
            await self._changed.wait_for(lambda: len(self.messages) >= n)
        return [m.text for m in self.messages]


@asynccontextmanager
async def _workers(
    target: StoreTarget, factories: list[Callable[[], Any]]
) -> AsyncIterator[list[tuple[ElectedAdapter, _Inbox, SqlSessionStore]]]:
    stores = [await target.open(lease_ttl_s=TTL_S) for _ in factories]
    workers = [
        (ElectedAdapter(factory, locks=store.locks, retry_s=0.05), _Inbox(), store)
        for factory, store in zip(factories, stores, strict=True)
    ]
    try:
        for adapter, inbox, _ in workers:
            await adapter.start(inbox)
        yield workers
    finally:
        for adapter, _, store in workers:
            await adapter.stop()
            await store.aclose()


def _telegram(fake: FakeTelegram, tag: str) -> Callable[[], TelegramAdapter]:
    def build() -> TelegramAdapter:
        return TelegramAdapter(
            token=fake.token,
            base_url=f"http://127.0.0.1:{fake.port}/{tag}/bot",
            poll_timeout_s=1.0,
            request_timeout_s=5.0,
        )

    return build


async def _leader(workers: list[tuple[ElectedAdapter, _Inbox, SqlSessionStore]]) -> int:
    """The index of the worker that becomes (or is) the leader."""
    waits = [asyncio.create_task(adapter.wait_leading()) for adapter, _, _ in workers]
    try:
        async with asyncio.timeout(SLOW_WAIT_S):
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    leaders = [i for i, (adapter, _, _) in enumerate(workers) if adapter.is_leader]
    assert len(leaders) == 1, leaders
    return leaders[0]


async def test_exactly_one_worker_polls_telegram_and_another_takes_over(
    store_target: StoreTarget,
) -> None:
    """Two workers: one polls (the fake sees one consumer, no 409); it steps down, the other
    polls and receives the next message."""
    async with FakeTelegram() as fake:
        async with _workers(store_target, [_telegram(fake, "w0"), _telegram(fake, "w1")]) as ws:
            first = await _leader(ws)
            await fake.push_text(42, 7, "hello leader")
            await fake.wait_for(lambda: fake.pending_update_ids == [], SLOW_WAIT_S)
            await fake.wait_for(lambda: fake.poll_consumers.count(f"w{first}") >= 3, SLOW_WAIT_S)
            assert set(fake.poll_consumers) == {f"w{first}"}
            assert fake.conflicts == 0
            assert [m.text for m in ws[first][1].messages] == ["hello leader"]
            assert ws[1 - first][1].messages == []
            with pytest.raises(PlatformError, match="another worker"):
                await ws[1 - first][0].send(ChatRef(platform="telegram", chat_id="42"), "hi")

            await ws[first][0].stop()
            second = 1 - first
            await fake.wait_for(lambda: f"w{second}" in fake.poll_consumers, SLOW_WAIT_S)
            await fake.push_text(42, 7, "hello successor")
            await fake.wait_for(lambda: fake.pending_update_ids == [], SLOW_WAIT_S)
            assert [m.text for m in ws[second][1].messages] == ["hello successor"]
            assert ws[second][0].terms == 1 and fake.conflicts == 0


async def test_a_leader_that_lost_its_lock_stops_polling(store_target: StoreTarget) -> None:
    """When the leader's lock is taken away (its connection killed, its lease taken over), it
    stops polling and the other worker polls instead."""
    async with FakeTelegram() as fake:
        async with _workers(store_target, [_telegram(fake, "w0"), _telegram(fake, "w1")]) as ws:
            first = await _leader(ws)
            await _take_leadership_away(ws[first][0], ws[first][2], store_target)
            second = 1 - first
            await fake.wait_for(lambda: f"w{second}" in fake.poll_consumers, SLOW_WAIT_S)
            async with asyncio.timeout(SLOW_WAIT_S):
                await ws[first][0].wait_leading(False)
            settled = len(fake.poll_consumers)
            await fake.push_text(42, 7, "after the takeover")
            assert await ws[second][1].wait_count(1) == ["after the takeover"]
            await fake.wait_for(lambda: f"w{second}" in fake.poll_consumers[settled:], SLOW_WAIT_S)
            assert set(fake.poll_consumers[settled:]) == {f"w{second}"}


async def _take_leadership_away(
    adapter: ElectedAdapter, store: SqlSessionStore, target: StoreTarget
) -> None:
    if target.dialect == "sqlite":
        async with store._engine.begin() as conn:
            await conn.execute(update(LEASES).values(expires_at=0.0, holder="usurper"))
        return
    import asyncpg
    from sqlalchemy.engine import make_url

    u = make_url(target.url)
    admin = await asyncpg.connect(
        host=u.host, port=u.port, user=u.username, database=u.database, timeout=10
    )
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks "
            "WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()"
        )
    finally:
        await admin.close()


def _discord(fake: FakeDiscord) -> Callable[[], DiscordAdapter]:
    def build() -> DiscordAdapter:
        return DiscordAdapter(
            token=fake.token, guild_ready_timeout_s=0.05, start_timeout_s=5.0, request_timeout_s=5.0
        )

    return build


async def test_exactly_one_worker_connects_to_discord(
    store_target: StoreTarget, patch_discord: FakeDiscord
) -> None:
    """Two workers: one gateway connection at a time, and the survivor connects when the
    leader steps down."""
    fake = patch_discord
    async with _workers(store_target, [_discord(fake), _discord(fake)]) as ws:
        first = await _leader(ws)
        await fake.wait_for(lambda: len(fake.identifies) == 1, what="the leader's IDENTIFY")
        await ws[first][0].stop()
        await fake.wait_for(lambda: len(fake.identifies) == 2, what="the successor's IDENTIFY")
        await _leader(ws)
        assert ws[1 - first][0].is_leader
        await fake.user_says("hello successor", channel_id=fake.dm_id)
        assert await ws[1 - first][1].wait_count(1) == ["hello successor"]
        assert fake.max_open_connections == 1


async def test_approvals_are_asked_through_the_leaders_buttons(store_target: StoreTarget) -> None:
    """An elected Telegram is still an approval channel: the leader shows the buttons and the
    press (which reaches the leader's polling) answers; a follower cannot ask."""
    async with FakeTelegram() as fake:
        await fake.push_text(42, 1001, "hello")
        async with _workers(store_target, [_telegram(fake, "w0"), _telegram(fake, "w1")]) as ws:
            first = await _leader(ws)
            assert await ws[first][1].wait_count(1) == ["hello"]
            chat = ChatRef(platform="telegram", chat_id="42")
            request = ApprovalRequest(kind="command", subject="rm -rf build", reason="rm -rf")
            with pytest.raises(PlatformError, match="another worker"):
                await ws[1 - first][0].ask_approval(
                    chat, request, may_answer=lambda _: True, timeout_s=SLOW_WAIT_S
                )
            asked = asyncio.create_task(
                ws[first][0].ask_approval(
                    chat, request, may_answer=lambda user: user == "1001", timeout_s=SLOW_WAIT_S
                )
            )
            await fake.wait_for(lambda: any(fake.markup_of(42, m.message_id) for m in fake.sent))
            question = next(m for m in fake.sent if fake.markup_of(42, m.message_id))
            markup = fake.markup_of(42, question.message_id)
            assert markup is not None
            buttons = {b["text"]: b["callback_data"] for r in markup["inline_keyboard"] for b in r}
            await fake.press_button(42, question.message_id, 1001, buttons["Deny"])
            async with asyncio.timeout(SLOW_WAIT_S):
                assert await asked == "deny"


async def test_every_worker_renders_in_the_platforms_markup(store_target: StoreTarget) -> None:
    """Rendering is pure: a follower renders Telegram HTML and limits as the leader does."""
    async with FakeTelegram() as fake:
        async with _workers(store_target, [_telegram(fake, "w0"), _telegram(fake, "w1")]) as ws:
            leader = await _leader(ws)
            follower = ws[1 - leader][0]
            assert follower.render("**bold** & `code`") == ["<b>bold</b> &amp; <code>code</code>"]
            assert [len(p) <= 4096 for p in follower.render("word " * 2000)] == [True, True, True]
