"""CodexAppServerEngine over the real provider and the fake app-server process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent.codex.app_server import CodexAppServerProvider, ThreadCompaction
from agent.codex.app_server_engine import (
    BOUNDARY_KIND,
    OUTCOME,
    CodexAppServerEngine,
    boundary_record,
    should_initiate,
)
from agent.config import CompressionConfig
from agent.context_engine import ContextEngine
from agent.errors import CompactionRefused, StoreError
from agent.messages import ChatMessage, assistant_message, system_message, user_message
from agent.providers.base import ProviderRequest, Usage
from tests.agent.codex.conftest import ProviderFactory, ServerLog

WINDOW = 400
"""Floored to 0.75 (window < 512K): the threshold is 300 tokens."""

Boundaries = list[dict[str, Any]]
EngineFactory = Callable[..., tuple[CodexAppServerEngine, CodexAppServerProvider, Boundaries]]


@pytest.fixture
def make_engine(app_server: ProviderFactory) -> EngineFactory:
    def make(
        mode: str, *flags: str, enabled: bool = True, timeout_s: float = 5.0
    ) -> tuple[CodexAppServerEngine, CodexAppServerProvider, Boundaries]:
        provider = app_server(*flags, timeout_s=timeout_s)
        boundaries: Boundaries = []

        async def on_boundary(record: dict[str, Any]) -> None:
            boundaries.append(record)

        config = CompressionConfig(codex_app_server_auto=mode, enabled=enabled)  # type: ignore[arg-type]
        engine = CodexAppServerEngine(config, compactor=provider, on_boundary=on_boundary)
        engine.update_model("gpt-5.5", WINDOW)
        return engine, provider, boundaries

    return make


async def _turn(
    engine: CodexAppServerEngine, provider: CodexAppServerProvider, messages: list[ChatMessage]
) -> list[ChatMessage]:
    """One agent-loop step: call, feed usage to the engine, append the reply."""
    reply = await provider.complete(ProviderRequest(model="gpt-5.5", messages=messages))
    engine.update_from_usage(reply.usage, messages)
    return [*messages, reply.message]


def _transcript() -> list[ChatMessage]:
    messages = [system_message("sys"), user_message("x" * 400)]
    for index, msg in enumerate(messages, start=1):
        msg["_id"] = index
        msg["_persisted"] = True
    return messages


class TestShouldInitiate:
    @pytest.mark.parametrize(
        ("mode", "reason", "enabled", "expected"),
        [
            ("native", "threshold", True, False),
            ("off", "threshold", True, False),
            ("hermes", "threshold", True, True),
            ("hermes", "context_too_long", True, True),
            ("hermes", "threshold", False, False),
            ("native", "manual", True, True),
            ("off", "manual", True, True),
            ("off", "manual", False, True),
        ],
    )
    def test_table(self, mode: Any, reason: str, enabled: bool, expected: bool) -> None:
        """Manual always initiates; automatic only in hermes mode with compression enabled."""
        assert should_initiate(mode=mode, reason=reason, enabled=enabled) is expected


class TestAutoModes:
    async def test_hermes_mode_threshold_starts_server_compaction(
        self, make_engine: EngineFactory, server_log: ServerLog
    ) -> None:
        """Past the threshold Hermes sends thread/compact/start; the transcript comes back as is."""
        engine, provider, boundaries = make_engine("hermes")
        transcript = await _turn(engine, provider, _transcript())
        assert engine.should_compress(transcript)
        snapshot = [dict(m) for m in transcript]
        result = await engine.compress(transcript, reason="threshold")
        assert server_log.methods().count("thread/compact/start") == 1
        assert result.messages == snapshot
        assert all(a is b for a, b in zip(result.messages, transcript, strict=True))
        assert transcript == snapshot
        assert (result.outcome, result.reason, result.detail) == (
            OUTCOME,
            "threshold",
            "transcript_unchanged",
        )
        assert result.messages_before == result.messages_after == 3
        assert result.tokens_after == 100 < result.tokens_before
        assert [b["initiator"] for b in boundaries] == ["hermes"]
        assert not engine.should_compress(transcript)  # usage unknown until the next turn

    @pytest.mark.parametrize("mode", ["native", "off"])
    async def test_native_and_off_never_initiate(
        self, make_engine: EngineFactory, server_log: ServerLog, mode: str
    ) -> None:
        """Above the threshold, native and off modes neither trigger nor accept automatic runs."""
        engine, provider, boundaries = make_engine(mode)
        transcript = await _turn(engine, provider, _transcript())
        assert engine.status().last_prompt_tokens >= engine.threshold_tokens
        assert not engine.should_compress(transcript)
        with pytest.raises(CompactionRefused, match=mode):
            await engine.compress(transcript, reason="threshold")
        assert "thread/compact/start" not in server_log.methods()
        assert boundaries == []

    @pytest.mark.parametrize("mode", ["native", "off", "hermes"])
    async def test_manual_compress_in_every_mode(
        self, make_engine: EngineFactory, server_log: ServerLog, mode: str
    ) -> None:
        """/compress always asks the server and records a manual boundary."""
        engine, provider, boundaries = make_engine(mode)
        transcript = await _turn(engine, provider, _transcript())
        result = await engine.compress(transcript, reason="manual")
        assert result.messages == transcript
        assert server_log.methods().count("thread/compact/start") == 1
        (boundary,) = boundaries
        assert boundary["kind"] == BOUNDARY_KIND
        assert boundary["initiator"] == "manual"
        assert boundary["thread_id"] == provider.thread_id
        assert boundary["message_count"] == 3
        assert boundary["last_message_id"] == 2
        assert engine.compaction_counts["manual"] == 1

    @pytest.mark.parametrize("mode", ["native", "off"])
    async def test_server_native_compaction_recorded(
        self, make_engine: EngineFactory, server_log: ServerLog, mode: str
    ) -> None:
        """Compactions codex runs itself are recorded as boundaries (codex may compact in off too)."""
        engine, provider, boundaries = make_engine(mode, "--native-compact-every", "1")
        transcript = await _turn(engine, provider, _transcript())
        assert "thread/compact/start" not in server_log.methods()
        (boundary,) = boundaries
        assert (boundary["initiator"], boundary["reason"]) == ("native", "native")
        assert boundary["message_count"] == 2  # the request the compaction happened in
        assert engine.compaction_counts == {"manual": 0, "hermes": 0, "native": 1}
        assert len(transcript) == 3


class TestFailures:
    async def test_hung_compaction_is_refused_and_counted(self, make_engine: EngineFactory) -> None:
        """A compaction that never completes becomes CompactionRefused; nothing is recorded."""
        engine, provider, boundaries = make_engine(
            "hermes", "--hang-on", "thread/compact/start", timeout_s=0.5
        )
        transcript = await _turn(engine, provider, _transcript())
        with pytest.raises(CompactionRefused, match="failed"):
            await engine.compress(transcript, reason="manual")
        assert boundaries == []
        assert engine.status().failures == 1

    async def test_store_failure_does_not_undo_compaction(
        self, app_server: ProviderFactory
    ) -> None:
        """If the boundary cannot be stored the result still returns (the thread did compact)."""
        provider = app_server()

        async def broken(record: dict[str, Any]) -> None:
            raise StoreError("disk full")

        engine = CodexAppServerEngine(CompressionConfig(), compactor=provider, on_boundary=broken)
        transcript = await _turn(engine, provider, _transcript())
        result = await engine.compress(transcript, reason="manual")
        assert result.messages == transcript


class TestEngineSurface:
    def test_is_a_context_engine_without_tools(self, app_server: ProviderFactory) -> None:
        """The engine plugs into the ContextEngine seam and offers no tools."""

        async def on_boundary(record: dict[str, Any]) -> None:
            return None

        engine = CodexAppServerEngine(
            CompressionConfig(), compactor=app_server(), on_boundary=on_boundary
        )
        assert isinstance(engine, ContextEngine)
        assert engine.tools() == []
        engine.update_model("gpt-5.5", 272_000)
        assert engine.threshold_tokens == int(272_000 * 0.75)
        engine.update_from_usage(Usage(input_tokens=5, cache_read_tokens=10), [])
        assert engine.status().last_prompt_tokens == 15
        engine.reset_session()
        assert engine.status().last_prompt_tokens == 0

    def test_boundary_record_points_at_last_persisted_row(self) -> None:
        """The boundary names the newest stored row and the server's post-compaction size."""
        messages = [user_message("a"), assistant_message("b")]
        messages[0]["_id"] = 7
        event = ThreadCompaction(
            thread_id="thr", turn_id="t", item_id="i", requested=True, usage=Usage(input_tokens=90)
        )
        record = boundary_record(
            event,
            initiator="manual",
            reason="manual",
            messages=messages,
            prompt_tokens_before=500,
            at=1.0,
        )
        assert record["last_message_id"] == 7
        assert record["prompt_tokens_after"] == 90
        assert record["message_count"] == 2
