"""The gpt-5.5 autoraise on Codex OAuth and its once-per-profile notice."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.codex.autoraise import (
    NOTICE_MARKER_FILE,
    NOTICE_OPT_OUT_COMMAND,
    OPT_OUT_COMMAND,
    autoraised_threshold,
    notice_for_autoraise,
)


class TestAutoraisedThreshold:
    @pytest.mark.parametrize(
        ("provider", "model", "expected"),
        [
            ("openai-codex", "gpt-5.5", 0.85),
            ("openai-codex", "gpt-5.5-2026-03-01", 0.85),
            ("openai-codex", "gpt-5.5-codex", 0.85),
            ("openai-codex", "GPT-5.5", 0.85),
            ("openai-codex", "gpt-5.51", 0.5),
            ("openai-codex", "gpt-5.5x", 0.5),
            ("openai-codex", "gpt-5.6", 0.5),
            ("openai-codex", "gpt-5", 0.5),
            ("openai", "gpt-5.5", 0.5),
            ("openrouter", "openai/gpt-5.5", 0.5),
            ("custom", "gpt-5.5", 0.5),
            ("anthropic", "gpt-5.5", 0.5),
        ],
    )
    def test_only_codex_route_and_gpt55(self, provider: str, model: str, expected: float) -> None:
        """85% only for gpt-5.5 (and dated/suffixed variants) on openai-codex; else unchanged."""
        assert (
            autoraised_threshold(provider=provider, model=model, threshold=0.5, autoraise=True)
            == expected
        )

    def test_opt_out_keeps_global_threshold(self) -> None:
        """compression.codex_gpt55_autoraise=false keeps the configured threshold."""
        assert (
            autoraised_threshold(
                provider="openai-codex", model="gpt-5.5", threshold=0.5, autoraise=False
            )
            == 0.5
        )

    def test_never_lowers_a_higher_threshold(self) -> None:
        """A raise is raise-only: 0.9 configured stays 0.9."""
        assert (
            autoraised_threshold(
                provider="openai-codex", model="gpt-5.5", threshold=0.9, autoraise=True
            )
            == 0.9
        )


class TestNotice:
    def test_shown_once_per_profile(self, hermes_home: Path) -> None:
        """The first call returns the notice and writes the marker; later calls return None."""
        first = notice_for_autoraise(hermes_home, raised=0.85, notice_enabled=True)
        assert first is not None
        assert "85%" in first
        assert OPT_OUT_COMMAND in first
        assert NOTICE_OPT_OUT_COMMAND in first
        assert (hermes_home / NOTICE_MARKER_FILE).read_text().strip() == "0.8500"
        for _ in range(3):  # e.g. every inbound gateway message builds an agent
            assert notice_for_autoraise(hermes_home, raised=0.85, notice_enabled=True) is None

    def test_renotifies_once_when_raised_value_changes(self, hermes_home: Path) -> None:
        """A different raised value notifies once more, then is quiet again."""
        assert notice_for_autoraise(hermes_home, raised=0.85, notice_enabled=True) is not None
        changed = notice_for_autoraise(hermes_home, raised=0.9, notice_enabled=True)
        assert changed is not None and "90%" in changed
        assert notice_for_autoraise(hermes_home, raised=0.9, notice_enabled=True) is None

    def test_notice_opt_out(self, hermes_home: Path) -> None:
        """compression.codex_gpt55_autoraise_notice=false: no notice and no marker."""
        assert notice_for_autoraise(hermes_home, raised=0.85, notice_enabled=False) is None
        assert not (hermes_home / NOTICE_MARKER_FILE).exists()

    def test_profiles_are_independent(self, tmp_path: Path) -> None:
        """Each HERMES_HOME (profile) gets its own one-time notice."""
        one, two = tmp_path / "one", tmp_path / "two"
        assert notice_for_autoraise(one, raised=0.85, notice_enabled=True) is not None
        assert notice_for_autoraise(two, raised=0.85, notice_enabled=True) is not None
        assert notice_for_autoraise(one, raised=0.85, notice_enabled=True) is None

    def test_garbled_marker_notifies_again(self, hermes_home: Path) -> None:
        """A marker that is not a number counts as never shown, and is repaired."""
        (hermes_home / NOTICE_MARKER_FILE).write_text("yes\n")
        assert notice_for_autoraise(hermes_home, raised=0.85, notice_enabled=True) is not None
        assert notice_for_autoraise(hermes_home, raised=0.85, notice_enabled=True) is None

    def test_unwritable_home_still_notifies(self, tmp_path: Path) -> None:
        """If the marker cannot be written the notice is still returned."""
        blocker = tmp_path / "file"
        blocker.write_text("")
        assert notice_for_autoraise(blocker / "home", raised=0.85, notice_enabled=True) is not None
