"""The hygiene decision: 85% of the window, API tokens first, never on short or disabled sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.hygiene import BACKOFF_S, decide_hygiene, next_backoff_until

WINDOW = 100_000


def _decide(**overrides: object):  # type: ignore[no-untyped-def]
    values: dict[str, object] = dict(
        api_tokens=None,
        estimated_tokens=0,
        context_length=WINDOW,
        history_len=10,
        enabled=True,
        backoff_until=None,
        now=1000.0,
    )
    values.update(overrides)
    return decide_hygiene(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "run", "source"),
    [
        ({"api_tokens": 85_000}, True, "api"),
        ({"api_tokens": 84_999}, False, "api"),
        ({"estimated_tokens": 85_000}, True, "estimate"),
        ({"estimated_tokens": 84_999}, False, "estimate"),
        ({"api_tokens": 10_000, "estimated_tokens": 99_000}, False, "api"),
        ({"api_tokens": 90_000, "history_len": 3}, False, "api"),
        ({"api_tokens": 90_000, "history_len": 4}, True, "api"),
        ({"api_tokens": 90_000, "enabled": False}, False, "api"),
        ({"api_tokens": 90_000, "backoff_until": 1001.0}, False, "api"),
        ({"api_tokens": 90_000, "backoff_until": 1000.0}, True, "api"),
    ],
)
def test_decide_hygiene(overrides: dict[str, object], run: bool, source: str) -> None:
    """Fires at exactly 85%, prefers API tokens, needs 4 messages, honours enable and backoff."""
    decision = _decide(**overrides)
    assert decision.run is run
    assert decision.source == source
    assert decision.reason


def test_hygiene_threshold_ignores_compression_threshold() -> None:
    """The 85% line is fixed: a session at 60% of the window is left to the agent's compressor."""
    assert not _decide(api_tokens=60_000).run


@pytest.mark.parametrize(("failures", "delay"), [(1, 300), (2, 900), (3, 2700), (9, 2700)])
def test_backoff_grows_5_15_45_minutes(failures: int, delay: float) -> None:
    """Consecutive failures back off 5, 15, then 45 minutes."""
    assert next_backoff_until(failures, 100.0) == 100.0 + delay
    assert delay in BACKOFF_S


async def test_estimate_is_calibrated_by_real_usage(tmp_path: Path) -> None:
    """Hygiene's fallback estimate follows the engine's per-model calibration, not bare chars/4."""
    from types import SimpleNamespace

    from agent.config import CompressionConfig, HermesConfig
    from agent.context_compressor import ContextCompressor
    from agent.messages import system_message, user_message
    from agent.providers.base import Usage
    from agent.tokens import estimate_messages_tokens_rough
    from gateway.hygiene import HYGIENE_RATIO, run_hygiene
    from state import SqlSessionStore
    from tests.fakes.provider import FakeProvider

    engine = ContextCompressor(CompressionConfig(), summarizer=FakeProvider(), summary_model="m")
    transcript = [system_message("sys"), *(user_message("да") for _ in range(3))]
    transcript.append(user_message("привет, как дела? " * 200))
    sent = list(transcript)
    engine.update_model("m", 100_000)
    engine.update_from_usage(Usage(input_tokens=2 * estimate_messages_tokens_rough(sent)), sent)
    transcript.append(user_message("и ещё " * 300))  # Cyrillic: ~2x chars/4
    rough = estimate_messages_tokens_rough(transcript)
    # A window where the calibrated count crosses 85% and bare chars/4 does not.
    engine.update_model("m", int(1.5 * rough / HYGIENE_RATIO))
    compactions: list[str] = []

    async def make_room(reason: str) -> bool:
        compactions.append(reason)
        return True

    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    try:
        session = await store.sessions.create_session()
        agent = SimpleNamespace(
            engine=engine,
            transcript=transcript,
            session_id=session.id,
            deps=SimpleNamespace(config=HermesConfig()),
            make_room=make_room,
        )
        outcome = await run_hygiene(agent, store.meta, api_tokens=None)  # type: ignore[arg-type]
    finally:
        await store.aclose()
    assert outcome.decision.source == "estimate"
    assert outcome.decision.tokens > 1.5 * rough
    assert compactions == ["hygiene"]
