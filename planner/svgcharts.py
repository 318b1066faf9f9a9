"""Small server-side SVG charts for documents that run no JavaScript (the sign-off PDF).

The pages draw their charts with Chart.js; a PDF renderer cannot run it, so the sign-off pack
draws the same figures here as plain SVG: a cost-versus-days scatter with P10-P90 bars and
stacked horizontal bars. Pure functions returning SVG text (escaped), no database.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#1f5fbf", "#e07b00", "#2e9d5b", "#b42318", "#7a4fbf", "#0f8b8d", "#8a6d3b")
WIDTH, HEIGHT = 640, 300
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 80, 20, 20, 50


@dataclass(frozen=True)
class Spread:
    """P10, P50 and P90 of one quantity."""

    p10: float
    p50: float
    p90: float


@dataclass(frozen=True)
class CostPoint:
    label: str
    days: Spread
    cost: Spread


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above ``value`` (axis end)."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 2.5, 5, 10) if step * magnitude >= value)


def _svg(body: list[str], title: str, height: int = HEIGHT) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="11">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _axis_ticks(
    top: float, to_pixel: Callable[[float], float], vertical: bool, fmt: str
) -> list[str]:
    parts = []
    for i in range(5):
        value = top * i / 4
        position = to_pixel(value)
        text = format(value, fmt)
        if vertical:
            parts.append(
                f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{position:.1f}" '
                f'y2="{position:.1f}" stroke="#e4e7eb"/>'
                f'<text x="{MARGIN_LEFT - 6}" y="{position + 4:.1f}" '
                f'text-anchor="end">{text}</text>'
            )
        else:
            parts.append(
                f'<text x="{position:.1f}" y="{HEIGHT - MARGIN_BOTTOM + 16}" '
                f'text-anchor="middle">{text}</text>'
            )
    return parts


def cost_versus_days(points: Sequence[CostPoint], currency: str) -> str:
    """Scatter of P50 cost against P50 days, with P10-P90 bars on both axes."""
    x_top = _nice_ceiling(max((p.days.p90 for p in points), default=1.0))
    y_top = _nice_ceiling(max((p.cost.p90 for p in points), default=1.0))
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def x(days: float) -> float:
        return MARGIN_LEFT + plot_w * days / x_top

    def y(cost: float) -> float:
        return MARGIN_TOP + plot_h * (1 - cost / y_top)

    body = _axis_ticks(y_top, y, True, ",.0f") + _axis_ticks(x_top, x, False, ",.0f")
    body.append(
        f'<text x="{MARGIN_LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">'
        "wall-clock days (P50, bars P10-P90)</text>"
        f'<text x="14" y="{MARGIN_TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {MARGIN_TOP + plot_h / 2})">cost, {escape(currency)}</text>'
    )
    for index, point in enumerate(points):
        colour = PALETTE[index % len(PALETTE)]
        cx, cy = x(point.days.p50), y(point.cost.p50)
        body.append(
            f'<line x1="{x(point.days.p10):.1f}" x2="{x(point.days.p90):.1f}" y1="{cy:.1f}" '
            f'y2="{cy:.1f}" stroke="{colour}" stroke-width="1.5"/>'
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(point.cost.p10):.1f}" '
            f'y2="{y(point.cost.p90):.1f}" stroke="{colour}" stroke-width="1.5"/>'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{colour}"/>'
            f'<text x="{cx + 8:.1f}" y="{cy - 8:.1f}" fill="{colour}">{escape(point.label)}</text>'
        )
    return _svg(body, f"Cost versus days ({currency})")


def stacked_bars(
    labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], unit: str
) -> str:
    """Horizontal stacked bars: one bar per label, one segment per series, with a legend."""
    totals = [sum(values[i] for _, values in series) for i in range(len(labels))]
    top = _nice_ceiling(max(totals, default=1.0))
    bar_h, gap = 22, 12
    height = MARGIN_TOP + len(labels) * (bar_h + gap) + 60
    # Room for the longest label on the left (about 6 px a character at 11 px) and the
    # total on the right of the longest bar.
    left = min(20 + 6 * max((len(label[:40]) for label in labels), default=4), WIDTH // 2)
    plot_w = WIDTH - left - MARGIN_RIGHT - 90
    body = []
    for row, label in enumerate(labels):
        top_y = MARGIN_TOP + row * (bar_h + gap)
        body.append(
            f'<text x="{left - 6}" y="{top_y + 15}" text-anchor="end">{escape(label[:40])}</text>'
        )
        start = 0.0
        for index, (_, values) in enumerate(series):
            width = plot_w * values[row] / top
            body.append(
                f'<rect x="{left + plot_w * start / top:.1f}" y="{top_y}" width="{width:.1f}" '
                f'height="{bar_h}" fill="{PALETTE[index % len(PALETTE)]}"/>'
            )
            start += values[row]
        body.append(
            f'<text x="{left + plot_w * start / top + 4:.1f}" y="{top_y + 15}">'
            f"{totals[row]:,.2f} {escape(unit)}</text>"
        )
    legend_y = MARGIN_TOP + len(labels) * (bar_h + gap) + 16
    for index, (name, _) in enumerate(series):
        lx = left + (index % 4) * 130
        ly = legend_y + (index // 4) * 16
        body.append(
            f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" '
            f'fill="{PALETTE[index % len(PALETTE)]}"/>'
            f'<text x="{lx + 14}" y="{ly}">{escape(name)}</text>'
        )
    return _svg(body, f"Stacked ({unit})", height)
