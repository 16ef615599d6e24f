"""The occupancy plot: valid SVG with one panel per mode and every batch compaction marked."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from sim.plot import render_svg, write_plot


def _result() -> dict[str, Any]:
    def rows(peaks: list[float], fired: set[int]) -> list[dict[str, Any]]:
        return [
            {"turn": i, "occupancy_pct": p, "batch_compaction": i in fired}
            for i, p in enumerate(peaks)
        ]

    totals = {"peak_occupancy_pct": 99.0, "mean_occupancy_pct": 50.0, "micro_passes": 0}
    return {
        "options": {"turns": 6, "context_window": 128_000, "seed": 7},
        "turns": {
            "batch": rows([10, 50, 99, 30, 80, 40], {3, 5}),
            "micro-always": rows([10, 20, 22, 22, 21, 22], set()),
        },
        "modes": {
            "batch": {**totals, "batch_compactions": 2},
            "micro-always": {**totals, "batch_compactions": 0, "micro_passes": 5},
        },
    }


def test_svg_has_a_panel_per_mode_and_marks_compactions() -> None:
    """Two modes give two polylines; each batch compaction gets one marker."""
    svg = render_svg(_result())
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}polyline")) == 2
    markers = [
        p for p in root.findall(f"{ns}path") if "batch compaction" in ET.tostring(p, "unicode")
    ]
    assert len(markers) == 2
    assert "micro-always" in svg and "threshold" in svg


def test_png_without_matplotlib_falls_back_to_svg(tmp_path: Path) -> None:
    """Asking for PNG without matplotlib writes the SVG beside it and says where."""
    if importlib.util.find_spec("matplotlib") is not None:
        pytest.skip("matplotlib is installed here")
    written = write_plot(tmp_path / "occ.png", _result())
    assert written == tmp_path / "occ.svg"
    assert written.read_text(encoding="utf-8").startswith("<svg")


def test_svg_path_is_written_as_asked(tmp_path: Path) -> None:
    """An .svg path is written exactly there."""
    assert write_plot(tmp_path / "p.svg", _result()) == tmp_path / "p.svg"
