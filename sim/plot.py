"""The replay plot: per mode, occupancy and compaction waits over simulated hours; SVG by hand.

Each mode gets a panel: occupancy (% of the compaction threshold) over the session's simulated
time, a tick under the curve for every micro pass (a dot for a defrag), a triangle for every batch
compaction (filled red when it blocked a turn, hollow when it did not), and beneath it a strip of
bars, one per turn that waited on compaction, as tall as the wait. `render_svg` is pure (result
dict in, SVG text out). `write_plot` writes `.svg` directly, and `.png` through matplotlib only
when it is installed; without it, it writes the SVG next to the path asked for and says so,
because matplotlib is not a dependency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

__all__ = ["render_svg", "time_ticks", "write_plot"]

PANEL_W = 420
PANEL_H = 220
STRIP_H = 56
MARGIN = 48
_COLORS = {"batch": "#c0392b", "micro-always": "#2471a3", "micro-cold": "#1e8449"}
_BLOCKING = "#c0392b"
_MICRO = "#1e8449"


def write_plot(path: Path, result: Mapping[str, Any]) -> Path:
    """Write the plot; returns the file actually written."""
    if path.suffix.lower() == ".png":
        try:
            return _write_png(path, result)
        except ImportError:
            path = path.with_suffix(".svg")
    path.write_text(render_svg(result), encoding="utf-8")
    return path


def render_svg(result: Mapping[str, Any]) -> str:
    """Side-by-side panels of occupancy and compaction waits over simulated hours."""
    modes = list(result["turns"])
    rows_of = {m: result["turns"][m] for m in modes}
    peak = max((r["occupancy_pct"] for rows in rows_of.values() for r in rows), default=100.0)
    y_max = max(100.0, _nice(peak * 1.08))
    hours = max((_end_hours(rows) for rows in rows_of.values()), default=0.0)
    x_max = max(hours, 1 / 60)
    wait_max = max(
        (r.get("compaction_wait_s", 0.0) for rows in rows_of.values() for r in rows), default=0.0
    )
    width = MARGIN + len(modes) * (PANEL_W + MARGIN)
    height = PANEL_H + STRIP_H + 2 * MARGIN + 90
    opts = result.get("options", {})
    latency = (opts.get("latency_model") or {}).get("name", "none")
    title = (
        f"Occupancy of the compaction threshold and compaction waits over {opts.get('turns', '?')} "
        f"turns ({opts.get('context_window', '?'):,} window, seed {opts.get('seed', '?')}, "
        f"latency model {latency})"
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{MARGIN}" y="20" font-size="14">{escape(title)}</text>',
    ]
    for i, mode in enumerate(modes):
        frame = _Frame(x0=MARGIN + i * (PANEL_W + MARGIN), y0=MARGIN + 10, x_max=x_max, y_max=y_max)
        parts += _panel(mode, rows_of[mode], result["modes"][mode], frame)
        parts += _wait_strip(rows_of[mode], frame, wait_max)
    parts.append("</svg>")
    return "\n".join(parts)


def time_ticks(hours: float) -> list[float]:
    """Tick positions in hours: 4 to 8 round steps from 0 to at least `hours`."""
    for step in (1 / 6, 0.25, 0.5, 1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 720):
        if hours / step <= 8:
            break
    count = max(1, math.ceil(hours / step - 1e-9))
    return [round(step * i, 4) for i in range(count + 1)]


class _Frame:
    """Where a panel sits and how hours and percentages map to pixels."""

    def __init__(self, *, x0: float, y0: float, x_max: float, y_max: float) -> None:
        self.x0, self.y0, self.y_max = x0, y0, y_max
        self.ticks = time_ticks(x_max)
        self.x_max = self.ticks[-1]

    def px(self, hours: float) -> float:
        return self.x0 + PANEL_W * hours / self.x_max

    def py(self, pct: float) -> float:
        return self.y0 + PANEL_H * (1 - min(pct, self.y_max) / self.y_max)

    @property
    def bottom(self) -> float:
        return self.y0 + PANEL_H


def _panel(
    mode: str, rows: Sequence[Mapping[str, Any]], totals: Mapping[str, Any], f: _Frame
) -> list[str]:
    color = _COLORS.get(mode, "#555")
    out = [
        f'<rect x="{f.x0}" y="{f.y0}" width="{PANEL_W}" height="{PANEL_H}" fill="none" '
        'stroke="#999"/>',
        f'<text x="{f.x0}" y="{f.y0 - 4}" font-size="12" font-weight="bold">{escape(mode)}</text>',
    ]
    for tick in _ticks(f.y_max):
        y = f.py(tick)
        dash = ' stroke-dasharray="4 3"' if tick == 100 else ""
        stroke = "#c33" if tick == 100 else "#e5e5e5"
        out.append(
            f'<line x1="{f.x0}" y1="{y:.1f}" x2="{f.x0 + PANEL_W}" y2="{y:.1f}" '
            f'stroke="{stroke}"{dash}/>'
        )
        out.append(f'<text x="{f.x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}%</text>')
    points = " ".join(f"{x:.1f},{f.py(pct):.1f}" for x, pct in _steps(rows, f))
    out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.5"/>')
    for r in rows:
        out += _markers(r, f)
    lines = (
        f"peak {totals['peak_occupancy_pct']}% · mean {totals['mean_occupancy_pct']}% · "
        f"batch {totals['batch_compactions']} (▲ blocking "
        f"{totals.get('blocking_compactions', 0)}, △ not)",
        f"micro {totals['micro_passes']} (| pass, ● defrag) · waited "
        f"{totals.get('compaction_wait_s_total', 0):.0f} s on compaction in "
        f"{totals.get('turns_waiting_on_compaction', 0)} turns",
    )
    for k, line in enumerate(lines):
        y = f.bottom + STRIP_H + 58 + 14 * k
        out.append(f'<text x="{f.x0}" y="{y}">{escape(line)}</text>')
    return out


def _markers(r: Mapping[str, Any], f: _Frame) -> list[str]:
    x, turn = f.px(_hours(r)), r["turn"]
    out = []
    if r.get("micro"):
        out.append(
            f'<line x1="{x:.1f}" y1="{f.bottom - 7}" x2="{x:.1f}" y2="{f.bottom}" '
            f'stroke="{_MICRO}" stroke-width="1"><title>micro pass ({escape(str(r["micro"]))}) '
            f"after turn {turn}</title></line>"
        )
    if r.get("micro") == "defragged":
        out.append(
            f'<circle cx="{x:.1f}" cy="{f.py(r["occupancy_pct"]):.1f}" r="2.2" '
            f'fill="#7d3c98"><title>micro defrag at turn {turn}</title></circle>'
        )
    if r["batch_compaction"]:
        blocking = r.get("blocking_compactions", 0) > 0
        fill = f'fill="{_BLOCKING}"' if blocking else f'fill="white" stroke="{_BLOCKING}"'
        what = "blocking batch compaction" if blocking else "batch compaction"
        out.append(
            f'<path d="M{x:.1f},{f.bottom + 2} l-4,8 h8 z" {fill}>'
            f"<title>{what} at turn {turn}</title></path>"
        )
    return out


def _wait_strip(rows: Sequence[Mapping[str, Any]], f: _Frame, wait_max: float) -> list[str]:
    top = f.bottom + 14
    base = top + STRIP_H
    out = [
        f'<line x1="{f.x0}" y1="{base}" x2="{f.x0 + PANEL_W}" y2="{base}" stroke="#999"/>',
        f'<text x="{f.x0 - 6}" y="{top + 8}" text-anchor="end">{wait_max:.0f} s</text>',
        f'<text x="{f.x0 - 6}" y="{base}" text-anchor="end">0</text>',
        f'<text x="{f.x0 + 4}" y="{top + 8}" fill="#777">compaction wait per turn</text>',
    ]
    for r in rows:
        wait = r.get("compaction_wait_s", 0.0)
        if wait <= 0 or wait_max <= 0:
            continue
        h = max(1.0, STRIP_H * wait / wait_max)
        out.append(
            f'<rect x="{f.px(_hours(r)) - 1:.1f}" y="{base - h:.1f}" width="2" height="{h:.1f}" '
            f'fill="{_BLOCKING}"><title>turn {r["turn"]} waited {wait:.1f} s on compaction'
            "</title></rect>"
        )
    for tick in f.ticks:
        x = f.px(tick)
        out.append(f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="#999"/>')
        out.append(f'<text x="{x:.1f}" y="{base + 15}" text-anchor="middle">{tick:g}</text>')
    out.append(
        f'<text x="{f.x0 + PANEL_W}" y="{base + 29}" text-anchor="end" fill="#555">'
        "simulated time (hours)</text>"
    )
    return out


def _steps(rows: Sequence[Mapping[str, Any]], f: _Frame) -> list[tuple[float, float]]:
    """Occupancy holds from one message to the next: a step line over time."""
    points: list[tuple[float, float]] = []
    for r in rows:
        x = f.px(_hours(r))
        if points:
            points.append((x, points[-1][1]))
        points.append((x, r["occupancy_pct"]))
    if rows:
        points.append((f.px(_end_hours(rows)), rows[-1]["occupancy_pct"]))
    return points


def _hours(row: Mapping[str, Any]) -> float:
    return float(row.get("arrived_s", 0.0)) / 3600


def _end_hours(rows: Sequence[Mapping[str, Any]]) -> float:
    return max(
        ((r.get("arrived_s", 0.0) + r.get("response_s", 0.0)) / 3600 for r in rows), default=0.0
    )


def _ticks(y_max: float) -> list[float]:
    step = 25.0 if y_max <= 150 else 50.0
    ticks, value = [], 0.0
    while value <= y_max + 1e-9:
        ticks.append(value)
        value += step
    return ticks


def _nice(value: float) -> float:
    return float(int(value / 25 + 1) * 25)


def _write_png(path: Path, result: Mapping[str, Any]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(result["turns"])
    fig, axes = plt.subplots(2, len(modes), figsize=(5 * len(modes), 4.4), squeeze=False)
    for col, mode in enumerate(modes):
        rows = result["turns"][mode]
        occ, wait = axes[0][col], axes[1][col]
        hours = [_hours(r) for r in rows]
        occ.plot(hours, [r["occupancy_pct"] for r in rows], lw=1.2)
        for h, r in zip(hours, rows, strict=True):
            if r.get("micro"):
                occ.axvline(h, ymax=0.04, color=_MICRO, lw=0.6)
            if r["batch_compaction"]:
                blocking = r.get("blocking_compactions", 0) > 0
                occ.axvline(h, color=_BLOCKING, lw=0.6, alpha=0.8 if blocking else 0.3)
        occ.axhline(100, color="#c33", ls="--", lw=0.8)
        occ.set_title(mode)
        wait.bar(
            hours, [r.get("compaction_wait_s", 0.0) for r in rows], width=0.05, color=_BLOCKING
        )
        wait.set_xlabel("simulated time (hours)")
    axes[0][0].set_ylabel("% of compaction threshold")
    axes[1][0].set_ylabel("compaction wait (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
