"""Small server-side SVG charts for documents that run no JavaScript (the sign-off PDF).

The pages draw their charts with Chart.js; a PDF renderer cannot run it, so the sign-off pack
draws the same figures here as plain SVG: a cost-versus-days scatter with P10-P90 bars,
stacked horizontal bars and the tornado of a run's sensitivity (:func:`tornado_svg`). Pure
functions returning SVG text (escaped), no database.

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


#: The cost-versus-days chart spans at most this many times the chosen run's P90 on each
#: axis: a run beyond is listed under the chart instead of shrinking the chosen one to a dot.
FOCUS_FACTOR = 3.0
NOTE_LINE = 15  # the height of a line of the note under the chart [px]


def chart_focus(
    points: Sequence[CostPoint], factor: float = FOCUS_FACTOR
) -> tuple[list[CostPoint], list[CostPoint]]:
    """The points drawn and those left off: the chosen run (the first point) and every run
    whose P50 days and cost are both within ``factor`` times the chosen run's P90."""
    if not points:
        return [], []
    chosen = points[0]

    def near(point: CostPoint) -> bool:
        return (
            point.days.p50 <= factor * chosen.days.p90
            and point.cost.p50 <= factor * chosen.cost.p90
        )

    return [chosen, *filter(near, points[1:])], [p for p in points[1:] if not near(p)]


def _focus_top(spreads: Sequence[Spread], factor: float = FOCUS_FACTOR) -> float:
    """An axis end: the largest P90 drawn, at most ``factor`` times the chosen run's."""
    return _nice_ceiling(min(max(s.p90 for s in spreads), factor * spreads[0].p90))


def _off_chart_note(left_off: Sequence[CostPoint], currency: str, top: float) -> list[str]:
    """One line per run left off the chart, its P50 days and cost, under the axis title."""
    if not left_off:
        return []
    lines = [f"Off the chart (beyond {FOCUS_FACTOR:g} times the chosen run's P90):"] + [
        f"{point.label}: {point.days.p50:,.0f} days, {_tick_text(point.cost.p50)} {currency}"
        for point in left_off
    ]
    return [
        f'<text class="off-chart" x="10" y="{top + NOTE_LINE * index:.1f}">'
        f"{escape(text_fit(line, WIDTH - 20))}</text>"
        for index, line in enumerate(lines)
    ]


def cost_versus_days(points: Sequence[CostPoint], currency: str) -> str:
    """Scatter of P50 cost against P50 days, with P10-P90 bars on both axes; each point's
    label where it covers no other label or point (with a leader line when moved away).

    The axes are scaled to the chosen run, the first point (:func:`chart_focus`): runs far
    beyond it are named in a note under the chart, and bars are cut at the axes' ends.
    """
    points, left_off = chart_focus(points)
    x_top = _focus_top([p.days for p in points]) if points else 1.0
    y_top = _focus_top([p.cost for p in points]) if points else 1.0
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def x(days: float) -> float:
        return MARGIN_LEFT + plot_w * min(days, x_top) / x_top

    def y(cost: float) -> float:
        return MARGIN_TOP + plot_h * (1 - min(cost, y_top) / y_top)

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
    body += _off_chart_note(left_off, currency, HEIGHT + NOTE_LINE)
    height = HEIGHT + (NOTE_LINE * (len(left_off) + 1) + 6 if left_off else 0)
    return _svg(body, f"Cost versus days ({currency})", height)


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


# --- Tornado: what moves the budget --------------------------------------------------------

#: Bars of an input at the low end of its range (first colour) and at the high end (second).
TORNADO_COLOURS = (PALETTE[0], PALETTE[1])
TORNADO_BAR, TORNADO_GAP = 18, 8
TORNADO_METRICS = {"cost": "cost", "days": "training_days"}
END_GAP = 4  # between a bar's end and the value written beyond it [px]


def _compact(value: float) -> str:
    """``270000000000`` as ``270B``: thousands, millions, billions, trillions."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def tornado_value_text(value: float, unit: str, currency: str = "") -> str:
    """An input's value the way the tornado writes it at a bar's end, by its ``unit``
    (:data:`estimator.core.sensitivity.INPUTS`): ``0.91x`` (with a multiplication sign),
    ``15 %``, ``750 s``, ``270B tokens``, ``2.25 USD/GPU-h``."""
    if unit == "x":
        return f"{value:.2f}×"  # noqa: RUF001 (the multiplication sign)
    if unit == "share":
        return f"{value * 100:.3g} %"
    if unit == "s":
        return f"{value:,.0f} s"
    if unit == "tokens":
        return f"{_compact(value)} tokens"
    if unit == "per GPU-hour":
        return f"{value:,.2f} {currency}/GPU-h" if currency else f"{value:,.2f}/GPU-h"
    return f"{value:.3g} {unit}".rstrip()


def _axis_text(value: float, step: float) -> str:
    """A tick's text: ``1.75M`` for millions, else as many decimals as the step needs."""
    if abs(value) >= 1_000_000 and step >= 10_000:
        return f"{value / 1_000_000:,.2f}".rstrip("0").rstrip(".") + "M"
    places = max(0, math.ceil(-math.log10(step)) + 1) if step < 1 else 0
    text = f"{value:,.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _nice_step(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k at or above ``value`` > 0 (any magnitude)."""
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 2.5, 5, 10) if step * magnitude >= value)


def _end_texts(item: dict, field: str, baseline: float, currency: str) -> list[tuple[str, float]]:
    """(text, figure) beyond each end of an input's bars: the input's value at the end its
    figure reaches. A row of no width gets one text: the value of an input fixed at one
    value, else ``no effect`` (the price on the days)."""
    low, high = (float(v) for v in item[field])
    unit = str(item.get("unit", ""))
    texts = [
        tornado_value_text(float(item[k]), unit, currency) for k in ("low_value", "high_value")
    ]
    if low == baseline and high == baseline:
        return [(texts[0] if texts[0] == texts[1] else "no effect", baseline)]
    return [(text, value) for text, value in zip(texts, (low, high), strict=True)
            if value != baseline]  # fmt: skip


def _swing(pair: Sequence[float]) -> float:
    return abs(float(pair[1]) - float(pair[0]))


def _tornado_axis(
    ends: Sequence[tuple[float, float]], left: float, right: float
) -> tuple[float, float]:
    """(centre, half): the baseline's x and the length of the longest bar, as long as the
    values written beyond the bars' ends still fit between ``left`` and ``right``.

    ``ends`` holds (d, w) for each text: d the bar's end over the longest bar (-1 to 1),
    w the text's width. A text right of the baseline needs centre + d half + gap + w <=
    right; one left of it centre + d half - gap - w >= left. Both bounds of the centre
    narrow as ``half`` grows, so the longest ``half`` is found by bisection.
    """

    def bounds(half: float) -> tuple[float, float]:
        low, high = left + half, right - half
        for d, width in ends:
            if d >= 0:
                high = min(high, right - END_GAP - width - d * half)
            else:
                low = max(low, left + END_GAP + width - d * half)
        return low, high

    shortest, longest = 0.0, (right - left) / 2
    for _ in range(50):
        half = (shortest + longest) / 2
        low, high = bounds(half)
        shortest, longest = (half, longest) if low <= high else (shortest, half)
    half = max(shortest, 24.0)  # texts wider than the chart: bars still show, texts may clip
    low, high = bounds(half)
    return min(max((low + high) / 2, left + half), right - half), half


def tornado_svg(data: dict, *, metric: str = "cost", currency: str = "USD") -> str:
    """Tornado chart of :func:`estimator.core.sensitivity.sensitivity`'s output.

    One row per input, largest swing of ``metric`` first (ties keep the given order; the
    price, which moves no day, goes last on the days' chart): a bar from the baseline
    (the central case, a dashed vertical line) to the figure with the input at the low end
    of its range (first colour), and one to the figure at the high end (second colour); the
    input's value is written beyond each bar's end. Lengths are proportional to how far the
    figure moves: x = centre + half (figure - baseline) / longest swing, the same scale on
    both sides.

    Parameters
    ----------
    data : dict
        ``baseline`` and ``inputs`` as :func:`~estimator.core.sensitivity.sensitivity`
        returns them.
    metric : str
        ``"cost"`` (in ``currency``) or ``"days"`` (training days).
    currency : str
        The price's currency, for the axis title and the price's values.

    Raises
    ------
    ValueError
        For another ``metric``.
    """
    if metric not in TORNADO_METRICS:
        raise ValueError(f"metric must be one of {sorted(TORNADO_METRICS)}, got {metric!r}")
    field = TORNADO_METRICS[metric]
    baseline = float(data["baseline"][field])
    inputs = sorted(data["inputs"], key=lambda item: -_swing(item[field]))
    ends = [_end_texts(item, field, baseline, currency) for item in inputs]
    span = max((abs(value - baseline) for row in ends for _, value in row), default=0.0)
    span = span or abs(baseline) * 0.05 or 1.0
    names = [text_fit(str(item["label"]), WIDTH // 3) for item in inputs]
    label_w = math.ceil(12 + max((text_width(name) for name in names), default=24.0))
    plot_left, plot_right = label_w, WIDTH - MARGIN_RIGHT
    centre, half = _tornado_axis(
        [((value - baseline) / span, text_width(text)) for row in ends for text, value in row],
        plot_left,
        plot_right,
    )

    def x(value: float) -> float:
        return centre + half * (value - baseline) / span

    def value_at(pixel: float) -> float:
        return baseline + span * (pixel - centre) / half

    top = MARGIN_TOP + 12
    bottom = top + len(inputs) * (TORNADO_BAR + TORNADO_GAP)
    body = _tornado_ticks(value_at(plot_left), value_at(plot_right), x, top, bottom)
    for row, (item, name) in enumerate(zip(inputs, names, strict=True)):
        top_y = top + row * (TORNADO_BAR + TORNADO_GAP)
        text_y = top_y + TORNADO_BAR / 2 + 4
        body.append(f'<text class="input-label" x="{label_w - 6}" y="{text_y:.1f}" '
                    f'text-anchor="end">{escape(name)}</text>')  # fmt: skip
        for side, value, colour in zip(("low", "high"), item[field], TORNADO_COLOURS, strict=True):
            left, right = sorted((x(baseline), x(float(value))))
            body.append(
                f'<rect class="bar-{side}" x="{left:.1f}" y="{top_y}" '
                f'width="{right - left:.1f}" height="{TORNADO_BAR}" fill="{colour}"/>'
            )
        for text, value in ends[row]:
            after = value >= baseline
            body.append(
                f'<text class="end-value" x="{x(value) + (END_GAP if after else -END_GAP):.1f}" '
                f'y="{text_y:.1f}" text-anchor="{"start" if after else "end"}">'
                f"{escape(text)}</text>"
            )
    unit = escape(currency) if metric == "cost" else "days"
    # As the pages' number filters write them: money whole from 1,000 else to the cent,
    # days whole from 100 else to a tenth.
    whole, places = (1000, 2) if metric == "cost" else (100, 1)
    figure = f"{baseline:,.{0 if abs(baseline) >= whole else places}f} {unit}"
    axis_title = f"cost, {unit}" if metric == "cost" else "training days (wall clock)"
    body.append(
        f'<line class="baseline" x1="{centre:.1f}" x2="{centre:.1f}" y1="{top - 4}" '
        f'y2="{bottom}" stroke="#17202a" stroke-width="1.2" stroke-dasharray="4 3"/>'
        f'<text class="baseline-label" x="{centre:.1f}" y="{top - 8}" text-anchor="middle">'
        f"central case {figure}</text>"
        f'<text x="{(plot_left + plot_right) / 2:.1f}" y="{bottom + 30}" '
        f'text-anchor="middle">{axis_title}</text>'
    )
    legend, last_baseline = _legend(
        ["input at the low end of its range", "input at the high end of its range"], bottom + 50
    )
    height = math.ceil(last_baseline + DESCENT + 10)
    title = f"What moves the budget: {'cost, ' + currency if metric == 'cost' else 'days'}"
    return _svg(body + legend, title, height)


def _tornado_ticks(
    lowest: float, highest: float, x: Callable[[float], float], top: float, bottom: float
) -> list[str]:
    """Grid lines and texts at round values between ``lowest`` and ``highest``, spaced so
    that no two texts touch and none leaves the plot."""
    step = _nice_step((highest - lowest) / 6)
    while True:
        first, last = math.ceil(lowest / step), math.floor(highest / step)
        texts = [(k * step, _axis_text(k * step, step)) for k in range(first, last + 1)]
        widest = max((text_width(text) for _, text in texts), default=0.0)
        if x(step) - x(0.0) >= widest + 10:
            break
        step = _nice_step(step * 1.001)
    parts = []
    for value, text in texts:
        position = x(value)
        if x(lowest) + text_width(text) / 2 <= position <= x(highest) - text_width(text) / 2:
            parts.append(
                f'<line x1="{position:.1f}" x2="{position:.1f}" y1="{top - 4}" y2="{bottom}" '
                f'stroke="#e4e7eb"/><text class="tick" x="{position:.1f}" y="{bottom + 14}" '
                f'text-anchor="middle">{text}</text>'
            )
    return parts
