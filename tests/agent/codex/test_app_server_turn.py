"""TurnCollector: folding app-server notifications into a turn outcome (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.codex._app_server_turn import TurnCollector, error_kind_for


def _note(method: str, **params: Any) -> dict[str, Any]:
    return {"method": method, "params": {"threadId": "thr", **params}}


class TestTurnCollector:
    def test_messages_joined_and_other_threads_ignored(self) -> None:
        """Two agent messages stream with a separator; another thread's events are ignored."""
        collector = TurnCollector(thread_id="thr")
        out = [
            collector.add(_note("item/agentMessage/delta", itemId="m1", delta="Looking")),
            collector.add(
                {
                    "method": "item/agentMessage/delta",
                    "params": {"threadId": "x", "itemId": "z", "delta": "!"},
                }
            ),
            collector.add(_note("item/agentMessage/delta", itemId="m2", delta="Done")),
        ]
        collector.add(
            _note(
                "item/completed",
                turnId="t",
                item={"type": "agentMessage", "id": "m2", "text": "Done."},
            )
        )
        collector.add(_note("turn/completed", turn={"id": "t", "status": "completed"}))
        assert out == ["Looking", None, "\n\nDone"]
        assert collector.text == "Looking\n\nDone."
        assert collector.done and collector.status == "completed"

    def test_item_and_deprecated_notification_are_one_compaction(self) -> None:
        """contextCompaction and thread/compacted for the same turn count once."""
        collector = TurnCollector(thread_id="thr", turn_id="t")
        collector.add(_note("thread/compacted", turnId="t"))
        collector.add(
            _note("item/completed", turnId="t", item={"type": "contextCompaction", "id": "c1"})
        )
        assert [(c.turn_id, c.item_id) for c in collector.compactions] == [("t", "c1")]

    def test_usage_from_last_breakdown(self) -> None:
        """`last` is this turn's usage; cached input is carved out of inputTokens."""
        collector = TurnCollector(thread_id="thr")
        last = {"inputTokens": 1000, "cachedInputTokens": 800, "outputTokens": 20}
        collector.add(
            _note(
                "thread/tokenUsage/updated",
                tokenUsage={"last": last, "total": {}, "modelContextWindow": 272000},
            )
        )
        assert collector.usage is not None
        assert (collector.usage.input_tokens, collector.usage.cache_read_tokens) == (200, 800)
        assert collector.context_window == 272000

    def test_failed_turn_keeps_error_info(self) -> None:
        """A failed turn's codexErrorInfo (string or object form) is kept."""
        collector = TurnCollector(thread_id="thr")
        error = {
            "message": "boom",
            "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 502}},
        }
        collector.add(_note("turn/completed", turn={"id": "t", "status": "failed", "error": error}))
        assert (collector.status, collector.error_info) == ("failed", "httpConnectionFailed")


@pytest.mark.parametrize(
    ("status", "info", "kind"),
    [
        ("failed", "contextWindowExceeded", "context_too_long"),
        ("failed", "usageLimitExceeded", "rate_limited"),
        ("failed", "unauthorized", "auth"),
        ("failed", "badRequest", "bad_request"),
        ("failed", "httpConnectionFailed", "unavailable"),
        ("interrupted", "", "unavailable"),
    ],
)
def test_error_kind_for(status: str, info: str, kind: str) -> None:
    """codexErrorInfo variants map onto agent.errors kinds."""
    assert error_kind_for(status, info) == kind
