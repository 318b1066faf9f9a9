"""Small server-side SVG charts for documents that run no JavaScript (the sign-off PDF).

The pages draw their charts with Chart.js; a PDF renderer cannot run it, so the sign-off pack
draws the same figures here as plain SVG: a cost-versus-days scatter with P10-P90 bars and
stacked horizontal bars. Pure functions returning SVG text (escaped), no database.

No text may leave the viewBox or cover another label: text widths are estimated from the
font size (:func:`text_width`), the scatter's labels go to the first free place around their
point, long names are shortened with an ellipsis and the legend wraps below the bars.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#1f5fbf", "#e07b00", "#2e9d5b", "#b42318", "#7a4fbf", "#0f8b8d", "#8a6d3b")
WIDTH, HEIGHT = 640, 300
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 80, 20, 20, 50
FONT_SIZE = 11
#: Average advance of a character as a share of the font size: DejaVu Sans' is about 0.6,
#: rounded up so that an estimate errs on the wide side.
CHAR_WIDTH = 0.65
#: A line of text above and below its baseline (DejaVu Sans' ascent and descent, rounded up).
ASCENT, DESCENT = 10, 3
LABEL_GAP = 2  # between two labels, and a label and a point
POINT_RADIUS = 5
LEGEND_ROW = 16
SCATTER_LABEL_WIDTH = 170  # a scenario's name beside its point, at most [px]


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


@dataclass(frozen=True)
class Box:
    """A rectangle in SVG pixels, ``left < right`` and ``top < bottom``."""

    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: Box, gap: float = 0.0) -> bool:
        return not (
            self.right + gap <= other.left
            or other.right + gap <= self.left
            or self.bottom + gap <= other.top
            or other.bottom + gap <= self.top
        )

    def inside(self, other: Box) -> bool:
        return (
            self.left >= other.left
            and self.right <= other.right
            and self.top >= other.top
            and self.bottom <= other.bottom
        )


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """The width ``text`` takes at font size ``size``, estimated generously. [px]"""
    return len(text) * size * CHAR_WIDTH


def text_fit(text: str, width: float, size: float = FONT_SIZE) -> str:
    """``text``, cut short with an ellipsis where it would be wider than ``width`` px."""
    most = max(int(width // (size * CHAR_WIDTH)), 1)
    return text if len(text) <= most else text[: most - 1].rstrip() + "…"


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above ``value`` (axis end)."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 2.5, 5, 10) if step * magnitude >= value)


def _tick_text(value: float) -> str:
    """``250,000``; millions as ``2.5M``, so that the text stays clear of the axis title."""
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:,.2f}".rstrip("0").rstrip(".") + "M"
    return f"{value:,.0f}"


def _svg(body: list[str], title: str, height: int = HEIGHT) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}" '
        f'font-family="sans-serif" font-size="{FONT_SIZE}">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _axis_ticks(top: float, to_pixel: Callable[[float], float], vertical: bool) -> list[str]:
    parts = []
    for i in range(5):
        value = top * i / 4
        position = to_pixel(value)
        text = _tick_text(value)
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


def _label_spots(x: float, y: float, width: float) -> Iterator[tuple[float, float]]:
    """Where a label of ``width`` px may start (left edge, baseline) around a point at
    (``x``, ``y``): beside it right and left, above and below, then ever further away."""
    near = POINT_RADIUS + 3
    right, left = x + near, x - near - width
    above, below = y - near, y + near + ASCENT
    yield from ((right, above), (right, below), (left, above), (left, below))
    yield from ((x - width / 2, y - near - 4), (x - width / 2, below + 4))
    line = ASCENT + DESCENT + LABEL_GAP
    for step in range(1, 40):
        for side in (right, left):
            yield from ((side, above - step * line), (side, below + step * line))


def _label_box(left: float, baseline: float, width: float) -> Box:
    return Box(left, baseline - ASCENT, left + width, baseline + DESCENT)


def _labels_place(anchors: Sequence[tuple[float, float]], widths: Sequence[float],
                  area: Box) -> list[tuple[float, float]]:  # fmt: skip
    """A free spot (left edge, baseline) for each label, in order: inside ``area``, clear of
    every point and of the labels placed before it; the first spot when none is free."""
    taken = [
        Box(x - POINT_RADIUS, y - POINT_RADIUS, x + POINT_RADIUS, y + POINT_RADIUS)
        for x, y in anchors
    ]
    spots = []
    for (x, y), width in zip(anchors, widths, strict=True):
        candidates = list(_label_spots(x, y, width))
        spot = next(
            (
                (left, baseline)
                for left, baseline in candidates
                if _label_box(left, baseline, width).inside(area)
                and not any(_label_box(left, baseline, width).overlaps(box, LABEL_GAP)
                            for box in taken)
            ),
            candidates[0],
        )  # fmt: skip
        spots.append(spot)
        taken.append(_label_box(*spot, width))
    return spots


def cost_versus_days(points: Sequence[CostPoint], currency: str) -> str:
    """Scatter of P50 cost against P50 days, with P10-P90 bars on both axes; each point's
    label where it covers no other label or point (with a leader line when moved away)."""
    x_top = _nice_ceiling(max((p.days.p90 for p in points), default=1.0))
    y_top = _nice_ceiling(max((p.cost.p90 for p in points), default=1.0))
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def x(days: float) -> float:
        return MARGIN_LEFT + plot_w * days / x_top

    def y(cost: float) -> float:
        return MARGIN_TOP + plot_h * (1 - cost / y_top)

    body = _axis_ticks(y_top, y, True) + _axis_ticks(x_top, x, False)
    body.append(
        f'<text x="{MARGIN_LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">'
        "wall-clock days (P50, bars P10-P90)</text>"
        f'<text x="14" y="{MARGIN_TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {MARGIN_TOP + plot_h / 2})">cost, {escape(currency)}</text>'
    )
    anchors = [(x(point.days.p50), y(point.cost.p50)) for point in points]
    labels = [text_fit(point.label, SCATTER_LABEL_WIDTH) for point in points]
    widths = [text_width(label) for label in labels]
    area = Box(MARGIN_LEFT + 2, 2, WIDTH - 2, HEIGHT - MARGIN_BOTTOM)
    spots = _labels_place(anchors, widths, area)
    for index, point in enumerate(points):
        colour = PALETTE[index % len(PALETTE)]
        (cx, cy), (left, baseline) = anchors[index], spots[index]
        body.append(
            f'<line x1="{x(point.days.p10):.1f}" x2="{x(point.days.p90):.1f}" y1="{cy:.1f}" '
            f'y2="{cy:.1f}" stroke="{colour}" stroke-width="1.5"/>'
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(point.cost.p10):.1f}" '
            f'y2="{y(point.cost.p90):.1f}" stroke="{colour}" stroke-width="1.5"/>'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{POINT_RADIUS}" fill="{colour}"/>'
            + _leader(cx, cy, _label_box(left, baseline, widths[index]), colour)
            + f'<text class="point-label" x="{left:.1f}" y="{baseline:.1f}" fill="{colour}">'
            f"{escape(labels[index])}</text>"
        )
    return _svg(body, f"Cost versus days ({currency})")


def _leader(x: float, y: float, box: Box, colour: str) -> str:
    """A thin line from a point to its label when the label had to move away from it."""
    near_x = min(max(x, box.left), box.right)
    near_y = min(max(y, box.top), box.bottom)
    if math.hypot(near_x - x, near_y - y) <= 2 * (POINT_RADIUS + 3):
        return ""
    return (
        f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{near_x:.1f}" y2="{near_y:.1f}" '
        f'stroke="{colour}" stroke-width="0.6" stroke-dasharray="2 2"/>'
    )


def _legend(series_names: Sequence[str], top: float) -> tuple[list[str], float]:
    """The legend's entries flowing left to right from the left edge, wrapping before the
    right edge; the SVG parts and the baseline of the last row."""
    swatch, space, left_edge, right_edge = 14, 16, 10.0, WIDTH - 10
    parts, x, baseline = [], left_edge, top
    for index, name in enumerate(series_names):
        text = text_fit(name, right_edge - left_edge - swatch)
        needed = swatch + text_width(text)
        if x > left_edge and x + needed > right_edge:
            x, baseline = left_edge, baseline + LEGEND_ROW
        parts.append(
            f'<rect x="{x:.1f}" y="{baseline - 9:.1f}" width="10" height="10" '
            f'fill="{PALETTE[index % len(PALETTE)]}"/>'
            f'<text class="legend" x="{x + swatch:.1f}" y="{baseline:.1f}">{escape(text)}</text>'
        )
        x += needed + space
    return parts, baseline


def stacked_bars(
    labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], unit: str
) -> str:
    """Horizontal stacked bars: one bar per label, one segment per series, with a legend
    below that wraps to as many rows as it needs."""
    totals = [sum(values[i] for _, values in series) for i in range(len(labels))]
    top = _nice_ceiling(max(totals, default=1.0))
    bar_h, gap = 22, 12
    # Room for the labels on the left (at most a third of the width: longer ones are cut
    # short) and for the longest total on the right of its bar.
    names = [text_fit(label, WIDTH // 3) for label in labels]
    left = math.ceil(12 + max((text_width(name) for name in names), default=24.0))
    total_texts = [f"{total:,.2f} {unit}" for total in totals]
    right_room = math.ceil(8 + max((text_width(text) for text in total_texts), default=0.0))
    plot_w = WIDTH - left - MARGIN_RIGHT - right_room
    body = []
    for row, name in enumerate(names):
        top_y = MARGIN_TOP + row * (bar_h + gap)
        body.append(f'<text x="{left - 6:.1f}" y="{top_y + 15}" text-anchor="end">'
                    f"{escape(name)}</text>")  # fmt: skip
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
            f"{escape(total_texts[row])}</text>"
        )
    legend, last_baseline = _legend([name for name, _ in series],
                                    MARGIN_TOP + len(labels) * (bar_h + gap) + 16)  # fmt: skip
    height = math.ceil(last_baseline + DESCENT + 10)
    return _svg(body + legend, f"Stacked ({unit})", height)
