"""A small line chart written as SVG text, for the plot every run logs.

Every run of a sweep writes one chart, so it has to be cheap: matplotlib costs about 1 s to
import and 0.15 s per figure, more than scoring 4,000 questions. A chart of a few series
over a handful of x values needs none of it. The MLflow UI previews ``.svg`` artifacts as
images. (The sweep's one summary figure, with a panel per axis, still uses matplotlib.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
WIDTH, HEIGHT = 500, 350
LEFT, RIGHT, TOP, BOTTOM = 60, 30, 20, 50  # margins around the plot area, in px
TITLE_LINE = 18  # px per title line, added above the plot area


@dataclass(frozen=True)
class Axes:
    """Maps data coordinates to pixels: x over ``x_range``, y over ``y_range``; ``top`` is
    the plot area's top edge (below the title)."""

    x_range: tuple[float, float]
    y_range: tuple[float, float]
    top: float = TOP

    @property
    def height(self) -> float:
        """The whole image's height."""
        return HEIGHT + self.top - TOP

    def x(self, value: float) -> float:
        low, high = self.x_range
        span = (high - low) or 1.0
        return LEFT + (value - low) / span * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        low, high = self.y_range
        span = (high - low) or 1.0
        return self.height - BOTTOM - (value - low) / span * (HEIGHT - TOP - BOTTOM)


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    x_ticks: Sequence[float],
    y_range: tuple[float, float],
    x_label: str,
    y_label: str,
    title: Sequence[str] = (),
) -> str:
    """SVG text of a chart with one marked line per entry of ``series`` (label → (x, y)
    points), x ticks at ``x_ticks``, y from ``y_range[0]`` to ``y_range[1]`` with five
    gridlines, axis labels, a legend and the lines of ``title`` above it (the first in
    bold)."""
    if not x_ticks:
        raise ValueError("a chart needs at least one x tick")
    axes = Axes((min(x_ticks), max(x_ticks)), y_range, TOP + TITLE_LINE * len(title))
    height = f"{axes.height:g}"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        *_title(title),
        *_grid(axes, x_ticks),
        *_axis_labels(axes, x_label, y_label),
    ]
    for i, (label, points) in enumerate(series.items()):
        parts += _series(axes, points, COLORS[i % len(COLORS)])
        parts += _legend_entry(axes, i, label, COLORS[i % len(COLORS)])
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _title(lines: Sequence[str]) -> list[str]:
    """The title lines, centred above the plot area; the first in bold."""
    weights = ["bold", *["normal"] * (len(lines) - 1)]
    return [
        f'<text x="{WIDTH / 2:.1f}" y="{TOP + TITLE_LINE * i - 4:.1f}" text-anchor="middle" '
        f'font-weight="{weight}">{escape(line)}</text>'
        for i, (line, weight) in enumerate(zip(lines, weights, strict=True))
    ]


def _grid(axes: Axes, x_ticks: Sequence[float]) -> list[str]:
    low, high = axes.y_range
    bottom = axes.height - BOTTOM
    lines = []
    for step in range(6):
        value = low + (high - low) * step / 5
        y = axes.y(value)
        lines.append(_line(LEFT, y, WIDTH - RIGHT, y, "#dddddd"))
        lines.append(_text(LEFT - 6, y + 4, f"{value:.2f}", anchor="end"))
    for tick in x_ticks:
        x = axes.x(tick)
        lines.append(_line(x, axes.top, x, bottom, "#eeeeee"))
        lines.append(_text(x, bottom + 16, f"{tick:g}", anchor="middle"))
    lines.append(_line(LEFT, bottom, WIDTH - RIGHT, bottom, "#333333"))
    lines.append(_line(LEFT, axes.top, LEFT, bottom, "#333333"))
    return lines


def _axis_labels(axes: Axes, x_label: str, y_label: str) -> list[str]:
    middle_y = (axes.top + axes.height - BOTTOM) / 2
    return [
        _text((LEFT + WIDTH - RIGHT) / 2, axes.height - 12, x_label, anchor="middle"),
        f'<text x="16" y="{middle_y:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {middle_y:.1f})">{escape(y_label)}</text>',
    ]


def _series(axes: Axes, points: Sequence[tuple[float, float]], color: str) -> list[str]:
    coords = " ".join(f"{axes.x(x):.1f},{axes.y(y):.1f}" for x, y in points)
    marks = [
        f'<circle cx="{axes.x(x):.1f}" cy="{axes.y(y):.1f}" r="3.5" fill="{color}"/>'
        for x, y in points
    ]
    return [f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>', *marks]


def _legend_entry(axes: Axes, index: int, label: str, color: str) -> list[str]:
    x, y = WIDTH - RIGHT - 110, axes.height - BOTTOM - 16 - 18 * index
    return [
        _line(x, y - 4, x + 20, y - 4, color, width=2),
        _text(x + 26, y, label, anchor="start"),
    ]


def _line(x1: float, y1: float, x2: float, y2: float, color: str, width: float = 1) -> str:
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
        f'stroke="{color}" stroke-width="{width}"/>'
    )


def _text(x: float, y: float, text: str, anchor: str) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{escape(text)}</text>'
