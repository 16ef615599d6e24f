"""The shared wait bound: 5 s, stretched by HERMES_TEST_WAIT_SCALE; a bad scale fails loudly."""

from __future__ import annotations

import pytest

from tests import waits


@pytest.mark.parametrize(("raw", "scale"), [(None, 1.0), ("", 1.0), ("3", 3.0), ("0.5", 0.5)])
def test_the_scale_stretches_the_bound(raw: str | None, scale: float) -> None:
    """Unset means 1; any positive number multiplies every bound."""
    assert waits._scale(raw) == scale


@pytest.mark.parametrize("raw", ["0", "-2", "fast", "nan", "inf"])
def test_a_scale_that_is_not_a_positive_number_is_refused(raw: str) -> None:
    """A typo must not silently shrink every bound to nothing (or to forever)."""
    with pytest.raises(ValueError, match="HERMES_TEST_WAIT_SCALE"):
        waits._scale(raw)


def test_the_slow_bound_follows_the_shared_one() -> None:
    """Both bounds move together with the scale."""
    assert waits.WAIT_S == 5.0 * waits.WAIT_SCALE
    assert waits.SLOW_WAIT_S == 6 * waits.WAIT_S
