"""The native Responses compaction gate: pure table tests."""

from __future__ import annotations

import pytest

from agent.codex.native_compaction import (
    endpoint_of,
    is_native_rejection,
    native_compaction_field,
)

DIRECT = "https://api.openai.com/v1"
CODEX = "https://chatgpt.com/backend-api/codex"


def _field(**overrides: object) -> dict[str, object] | None:
    args: dict[str, object] = {
        "enabled": True,
        "model": "gpt-5.6",
        "base_url": DIRECT,
        "provider": "openai",
        "local_trigger_tokens": 500_000,
        "configured_threshold": 200_000,
        "disabled_for_session": False,
    }
    args.update(overrides)
    return native_compaction_field(**args)  # type: ignore[arg-type]


class TestGate:
    @pytest.mark.parametrize(
        ("overrides", "expected"),
        [
            ({}, True),
            ({"model": "gpt-5.6-mini"}, True),
            ({"model": "gpt-5.6-2026-08-01"}, True),
            ({"provider": "openai-codex", "base_url": None}, True),
            ({"provider": "openai-codex", "base_url": CODEX + "/"}, True),
            ({"provider": "openai", "base_url": None}, True),
            ({"enabled": False}, False),
            ({"disabled_for_session": True}, False),
            ({"model": "gpt-5.5"}, False),
            ({"model": "gpt-5.2"}, False),
            ({"model": "gpt-5.60"}, False),
            ({"base_url": "https://api.x.ai/v1"}, False),
            ({"base_url": "https://openrouter.ai/api/v1", "provider": "openrouter"}, False),
            ({"base_url": "https://api.githubcopilot.com"}, False),
            ({"base_url": "http://127.0.0.1:11434/v1", "provider": "custom"}, False),
            ({"base_url": "https://chatgpt.com/backend-api/other"}, False),
            ({"base_url": "https://api.openai.com.evil.example/v1"}, False),
            ({"base_url": "http://api.openai.com/v1"}, False),
            ({"provider": "custom", "base_url": None}, False),
        ],
    )
    def test_only_gpt56_on_direct_or_codex(
        self, overrides: dict[str, object], expected: bool
    ) -> None:
        """The field exists only for gpt-5.6 on api.openai.com or the Codex backend, opted in."""
        assert (_field(**overrides) is not None) is expected

    @pytest.mark.parametrize(
        ("configured", "trigger", "expected"),
        [
            (200_000, 500_000, 200_000),
            (200_000, 100_000, 91_808),
            (200_000, 10_000, 16_384),
            (8_000, 500_000, 16_384),
        ],
    )
    def test_threshold_clamp(self, configured: int, trigger: int, expected: int) -> None:
        """N = min(configured, trigger - 8192), never below the 16,384 floor."""
        assert _field(configured_threshold=configured, local_trigger_tokens=trigger) == {
            "type": "compaction",
            "compact_threshold": expected,
        }


class TestRejection:
    @pytest.mark.parametrize(
        ("status", "message", "param", "code", "expected"),
        [
            (400, "Unsupported parameter", "context_management", None, True),
            (400, "Unknown parameter: 'context_management'.", None, None, True),
            (400, "compaction is not supported for this model", None, None, True),
            (400, "bad", None, "unsupported_compact_threshold", True),
            (400, "tools[0] is invalid", "tools", None, False),
            (500, "compaction crashed", None, None, False),
            (422, "context_management", None, None, False),
        ],
    )
    def test_structured_rejection(
        self, status: int, message: str, param: str | None, code: str | None, expected: bool
    ) -> None:
        """Only a 400 naming the field counts; 5xx never does."""
        assert is_native_rejection(status, message, param=param, code=code) is expected


@pytest.mark.parametrize(
    ("provider", "base_url", "expected"),
    [
        ("openai", None, "api.openai.com"),
        ("openai", "https://API.openai.com/v1", "api.openai.com"),
        ("openai-codex", None, "chatgpt.com"),
        ("openai", "http://127.0.0.1:8080/v1", "127.0.0.1:8080"),
    ],
)
def test_endpoint_of(provider: str, base_url: str | None, expected: str) -> None:
    """Replayed items are tagged with the issuing host (and explicit port)."""
    assert endpoint_of(provider=provider, base_url=base_url) == expected
