"""CodexAppServerProvider against the fake `codex app-server` process over real stdio pipes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

import pytest

from agent.codex.app_server import ThreadCompaction, new_user_text
from agent.errors import BadRequest, CompactionRefused, ContextTooLong, ProviderUnavailable
from agent.messages import ChatMessage, assistant_message, system_message, user_message
from agent.providers.base import ProviderRequest
from tests.agent.codex.conftest import ProviderFactory, ServerLog


def _request(*messages: ChatMessage) -> ProviderRequest:
    return ProviderRequest(model="gpt-5.5", messages=list(messages))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class TestNewUserText:
    @pytest.mark.parametrize(
        ("messages", "expected"),
        [
            ([system_message("s"), user_message("hi")], "hi"),
            ([user_message("a"), assistant_message("b"), user_message("c")], "c"),
            (
                [user_message("a"), assistant_message("b"), user_message("c"), user_message("d")],
                "c\n\nd",
            ),
            ([user_message("a"), assistant_message("b")], ""),
        ],
    )
    def test_only_words_since_last_assistant(
        self, messages: list[ChatMessage], expected: str
    ) -> None:
        """codex owns the thread, so only the user's newest words are sent."""
        assert new_user_text(messages) == expected


class TestTurns:
    async def test_turn_streams_and_returns_reply(
        self, app_server: ProviderFactory, server_log: ServerLog
    ) -> None:
        """Handshake, one thread, a turn with only the new text; deltas stream; usage parsed."""
        provider = app_server()
        deltas: list[str] = []

        async def on_text(delta: str) -> None:
            deltas.append(delta)

        history = [system_message("sys"), user_message("first"), assistant_message("old")]
        reply = await provider.complete(
            _request(*history, user_message("hello codex")), on_text=on_text
        )
        assert reply.message == {"role": "assistant", "content": "echo: hello codex"}
        assert "".join(deltas) == "echo: hello codex"
        assert len(deltas) == 3
        assert reply.usage.cache_read_tokens > 0
        assert reply.usage.prompt_tokens == reply.usage.input_tokens + reply.usage.cache_read_tokens
        assert server_log.methods() == ["initialize", "initialized", "thread/start", "turn/start"]
        (turn,) = server_log.params_of("turn/start")
        assert turn == {
            "threadId": provider.thread_id,
            "input": [{"type": "text", "text": "hello codex"}],
        }

    async def test_one_thread_per_session(
        self, app_server: ProviderFactory, server_log: ServerLog
    ) -> None:
        """Later turns reuse the thread; the handshake happens once."""
        provider = app_server()
        await provider.complete(_request(user_message("a")))
        await provider.complete(
            _request(user_message("a"), assistant_message("x"), user_message("b"))
        )
        assert server_log.methods().count("thread/start") == 1
        assert server_log.methods().count("initialize") == 1
        assert [p["input"][0]["text"] for p in server_log.params_of("turn/start")] == ["a", "b"]

    async def test_nothing_new_to_send_is_a_bad_request(self, app_server: ProviderFactory) -> None:
        """A request without new user words is refused before anything is sent."""
        provider = app_server()
        with pytest.raises(BadRequest):
            await provider.complete(_request(user_message("a"), assistant_message("b")))
        assert provider.pid is None

    async def test_failed_turn_maps_codex_error_info(self, app_server: ProviderFactory) -> None:
        """A turn that fails with contextWindowExceeded raises ContextTooLong."""
        provider = app_server("--fail-turn", "contextWindowExceeded")
        with pytest.raises(ContextTooLong):
            await provider.complete(_request(user_message("hi")))


class TestCompaction:
    async def test_manual_compaction_waits_for_compaction_turn(
        self, app_server: ProviderFactory, server_log: ServerLog
    ) -> None:
        """compact_thread returns only after the compaction turn completed (0.3 s in the fake)."""
        provider = app_server("--compact-delay", "0.3")
        await provider.complete(_request(user_message("hi")))
        event = await provider.compact_thread()
        assert event.requested is True
        assert event.thread_id == provider.thread_id
        assert event.item_id is not None and event.item_id.startswith("cmp_")
        assert event.duration_ms >= 300
        assert event.usage is not None and event.usage.prompt_tokens == 100
        assert server_log.params_of("thread/compact/start") == [{"threadId": provider.thread_id}]

    async def test_compaction_before_any_thread_is_refused(
        self, app_server: ProviderFactory
    ) -> None:
        """With no thread there is nothing to compact."""
        provider = app_server()
        with pytest.raises(CompactionRefused):
            await provider.compact_thread()

    async def test_native_compaction_reported_to_listeners(
        self, app_server: ProviderFactory
    ) -> None:
        """A compaction codex runs on its own during a turn reaches the listener once."""
        provider = app_server("--native-compact-every", "2")
        seen: list[tuple[ThreadCompaction, int]] = []

        async def listener(event: ThreadCompaction, messages: Sequence[ChatMessage]) -> None:
            seen.append((event, len(messages)))

        provider.add_compaction_listener(listener)
        first = [user_message("a")]
        await provider.complete(_request(*first))
        assert seen == []
        second = [*first, assistant_message("x"), user_message("b")]
        await provider.complete(_request(*second))
        assert len(seen) == 1
        event, count = seen[0]
        assert (event.requested, count) == (False, 3)
        assert event.item_id is not None


class TestLifecycle:
    async def test_process_killed_on_close(self, app_server: ProviderFactory) -> None:
        """A server that ignores stdin EOF is killed by aclose."""
        provider = app_server("--linger")
        await provider.complete(_request(user_message("hi")))
        pid = provider.pid
        assert pid is not None and _alive(pid)
        await provider.aclose()
        assert provider.returncode is not None
        assert not _alive(pid)

    async def test_hung_server_times_out_cleanly(
        self, app_server: ProviderFactory, server_log: ServerLog
    ) -> None:
        """A turn/start that is never answered ends in ProviderUnavailable within the deadline."""
        provider = app_server("--hang-on", "turn/start", timeout_s=0.5)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ProviderUnavailable):
            await provider.complete(_request(user_message("hi")))
        assert loop.time() - started < 3.0
        await provider.aclose()
        assert provider.returncode is not None

    async def test_deadline_is_idle_time_not_turn_length(self, app_server: ProviderFactory) -> None:
        """A turn that keeps streaming outlives timeout_s: each notification resets the deadline."""
        provider = app_server("--delta-delay", "0.2", timeout_s=0.5)
        loop = asyncio.get_running_loop()
        started = loop.time()
        reply = await provider.complete(_request(user_message("one two three four")))
        assert reply.message["content"] == "echo: one two three four"
        assert loop.time() - started > 0.5

    async def test_hung_handshake_times_out(self, app_server: ProviderFactory) -> None:
        """An initialize that is never answered fails after request_timeout_s."""
        provider = app_server("--hang-on", "initialize", request_timeout_s=0.3)
        with pytest.raises(ProviderUnavailable):
            await provider.complete(_request(user_message("hi")))

    async def test_server_exit_mid_session_is_unavailable(
        self, app_server: ProviderFactory
    ) -> None:
        """If the process dies, the next call fails fast instead of hanging."""
        provider = app_server()
        await provider.complete(_request(user_message("a")))
        assert provider.pid is not None
        os.kill(provider.pid, 9)
        with pytest.raises(ProviderUnavailable):
            async with asyncio.timeout(3):
                await provider.complete(
                    _request(user_message("a"), assistant_message("x"), user_message("b"))
                )
