"""The occupancy plot: one panel per mode, occupancy over turns, compactions marked; SVG by hand.

`render_svg` is pure (result dict in, SVG text out). `write_plot` writes `.svg` directly, and `.png`
through matplotlib only when it is installed; without it, it writes the SVG next to the path asked
for and says so, because matplotlib is not a dependency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

__all__ = ["render_svg", "write_plot"]

PANEL_W = 420
PANEL_H = 260
MARGIN = 48
_COLORS = {"batch": "#c0392b", "micro-always": "#2471a3", "micro-cold": "#1e8449"}


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
    """Side-by-side panels of occupancy (% of the compaction threshold) per turn."""
    modes = list(result["turns"])
    peak = max((r["occupancy_pct"] for m in modes for r in result["turns"][m]), default=100.0)
    y_max = max(100.0, _nice(peak * 1.08))
    width = MARGIN + len(modes) * (PANEL_W + MARGIN)
    height = PANEL_H + 2 * MARGIN + 30
    opts = result.get("options", {})
    title = (
        f"Occupancy of the compaction threshold over {opts.get('turns', '?')} turns "
        f"({opts.get('context_window', '?'):,} window, seed {opts.get('seed', '?')})"
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{MARGIN}" y="20" font-size="14">{escape(title)}</text>',
    ]
    for i, mode in enumerate(modes):
        x0 = MARGIN + i * (PANEL_W + MARGIN)
        totals = result["modes"][mode]
        parts += _panel(mode, result["turns"][mode], totals, x0, MARGIN + 10, y_max)
    parts.append("</svg>")
    return "\n".join(parts)


def _panel(
    mode: str,
    rows: Sequence[Mapping[str, Any]],
    totals: Mapping[str, Any],
    x0: float,
    y0: float,
    y_max: float,
) -> list[str]:
    n = max(1, len(rows) - 1)
    color = _COLORS.get(mode, "#555")

    def px(turn: int) -> float:
        return x0 + PANEL_W * turn / n

    def py(pct: float) -> float:
        return y0 + PANEL_H * (1 - min(pct, y_max) / y_max)

    out = [
        f'<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#999"/>',
        f'<text x="{x0}" y="{y0 - 4}" font-size="12" font-weight="bold">{escape(mode)}</text>',
    ]
    for tick in _ticks(y_max):
        y = py(tick)
        dash = ' stroke-dasharray="4 3"' if tick == 100 else ""
        stroke = "#c33" if tick == 100 else "#e5e5e5"
        out.append(
            f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + PANEL_W}" y2="{y:.1f}" stroke="{stroke}"{dash}/>'
        )
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}%</text>')
    points = " ".join(f"{px(r['turn']):.1f},{py(r['occupancy_pct']):.1f}" for r in rows)
    out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.5"/>')
    for r in rows:
        if r.get("micro") == "defragged":
            out.append(
                f'<circle cx="{px(r["turn"]):.1f}" cy="{py(r["occupancy_pct"]):.1f}" r="2.2" '
                f'fill="#7d3c98"><title>micro defrag at turn {r["turn"]}</title></circle>'
            )
        if r["batch_compaction"]:
            x = px(r["turn"])
            out.append(
                f'<path d="M{x:.1f},{y0 + PANEL_H + 2} l-4,8 h8 z" fill="#c0392b">'
                f"<title>batch compaction at turn {r['turn']}</title></path>"
            )
    legend = (
        f"peak {totals['peak_occupancy_pct']}% · mean {totals['mean_occupancy_pct']}% · "
        f"batch {totals['batch_compactions']} (▲) · micro {totals['micro_passes']} (● defrag)"
    )
    out.append(f'<text x="{x0}" y="{y0 + PANEL_H + 26}">{escape(legend)}</text>')
    out.append(
        f'<text x="{x0 + PANEL_W}" y="{y0 + PANEL_H + 40}" text-anchor="end" fill="#777">turn</text>'
    )
    return out


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
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 3.4), sharey=True)
    for ax, mode in zip([axes] if len(modes) == 1 else axes, modes, strict=True):
        rows = result["turns"][mode]
        ax.plot([r["turn"] for r in rows], [r["occupancy_pct"] for r in rows], lw=1.2)
        for r in rows:
            if r["batch_compaction"]:
                ax.axvline(r["turn"], color="#c0392b", lw=0.6, alpha=0.6)
        ax.axhline(100, color="#c33", ls="--", lw=0.8)
        ax.set_title(mode)
        ax.set_xlabel("turn")
    axes_list = [axes] if len(modes) == 1 else list(axes)
    axes_list[0].set_ylabel("% of compaction threshold")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
