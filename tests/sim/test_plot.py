"""The replay plot: valid SVG with one panel per mode over simulated hours, micro passes,
blocking and non-blocking compactions and compaction waits marked."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from sim.plot import render_svg, time_ticks, write_plot

NS = "{http://www.w3.org/2000/svg}"


def _result() -> dict[str, Any]:
    def rows(
        peaks: list[float], fired: dict[int, int], micro: set[int], waits: dict[int, float]
    ) -> list[dict[str, Any]]:
        return [
            {
                "turn": i,
                "occupancy_pct": p,
                "batch_compaction": i in fired,
                "blocking_compactions": fired.get(i, 0),
                "micro": "defragged"
                if i == 4 and i in micro
                else ("absorbed" if i in micro else None),
                "arrived_s": 1800.0 * i,
                "response_s": 30.0,
                "compaction_wait_s": waits.get(i, 0.0),
            }
            for i, p in enumerate(peaks)
        ]

    totals = {"peak_occupancy_pct": 99.0, "mean_occupancy_pct": 50.0, "micro_passes": 0}
    return {
        "options": {
            "turns": 6,
            "context_window": 128_000,
            "seed": 7,
            "latency_model": {"name": "local"},
        },
        "turns": {
            "batch": rows([10, 50, 99, 30, 80, 40], {3: 1, 5: 0}, set(), {3: 95.0}),
            "micro-always": rows([10, 20, 22, 22, 21, 22], {}, {1, 2, 3, 4}, {2: 12.5}),
        },
        "modes": {
            "batch": {**totals, "batch_compactions": 2, "blocking_compactions": 1},
            "micro-always": {**totals, "batch_compactions": 0, "micro_passes": 4},
        },
    }


def _titles(root: ET.Element, tag: str) -> list[str]:
    return ["".join(t.itertext()) for e in root.iter(f"{NS}{tag}") for t in e.findall(f"{NS}title")]


def test_svg_has_a_panel_per_mode_and_marks_compactions() -> None:
    """Two modes give two lines; the blocking compaction is filled, the other hollow."""
    root = ET.fromstring(render_svg(_result()))
    assert len(root.findall(f"{NS}polyline")) == 2
    triangles = [p for p in root.iter(f"{NS}path") if p.find(f"{NS}title") is not None]
    assert [p.get("fill") for p in triangles] == ["#c0392b", "white"]
    assert _titles(root, "path") == [
        "blocking batch compaction at turn 3",
        "batch compaction at turn 5",
    ]


def test_micro_passes_and_waits_are_marked() -> None:
    """Each micro pass gets a tick (a defrag also a dot); each turn that waited, a bar."""
    root = ET.fromstring(render_svg(_result()))
    ticks = [t for t in _titles(root, "line") if t.startswith("micro pass")]
    assert len(ticks) == 4 and "micro pass (defragged) after turn 4" in ticks
    assert _titles(root, "circle") == ["micro defrag at turn 4"]
    assert _titles(root, "rect") == [
        "turn 3 waited 95.0 s on compaction",
        "turn 2 waited 12.5 s on compaction",
    ]


def test_the_time_axis_is_labelled_in_simulated_hours() -> None:
    """The x axis reads hours from 0 past the session's end, and says so."""
    svg = render_svg(_result())
    labels = ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{NS}text")]
    assert labels.count("simulated time (hours)") == 2
    assert {"0", "1", "2", "3"} <= set(labels)
    assert "latency model local" in svg


@pytest.mark.parametrize(
    ("hours", "ticks"),
    [
        (2.5, [0, 0.5, 1, 1.5, 2, 2.5]),
        (7, [0, 1, 2, 3, 4, 5, 6, 7]),
        (240.6, [0, 48, 96, 144, 192, 240, 288]),
        (0.01, [0, 1 / 6]),
    ],
)
def test_time_ticks_are_round_steps_covering_the_session(hours: float, ticks: list[float]) -> None:
    """Four to eight round steps from 0 to at least the session's length."""
    assert time_ticks(hours) == pytest.approx(ticks, abs=1e-3)


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
