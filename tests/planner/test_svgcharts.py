"""Server-side SVG charts of the sign-off pack: positions follow the data, text is escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from planner.svgcharts import (
    HEIGHT,
    MARGIN_BOTTOM,
    MARGIN_LEFT,
    MARGIN_RIGHT,
    MARGIN_TOP,
    WIDTH,
    CostPoint,
    Spread,
    _nice_ceiling,
    cost_versus_days,
    stacked_bars,
)

NS = {"svg": "http://www.w3.org/2000/svg"}


def test_nice_ceiling_rounds_up_to_1_2_2_5_5() -> None:
    assert [_nice_ceiling(v) for v in (0.7, 1, 3, 21, 260, 4_672_440)] == [
        1.0, 1.0, 5.0, 25.0, 500.0, 5_000_000.0,
    ]  # fmt: skip


def test_cost_versus_days_places_p50_points_on_the_scaled_axes() -> None:
    points = [
        CostPoint("A100 <cheap>", Spread(40, 50, 60), Spread(80, 100, 130)),
        CostPoint("H100", Spread(20, 25, 30), Spread(150, 180, 200)),
    ]
    svg = cost_versus_days(points, "USD")
    root = ET.fromstring(svg)  # noqa: S314 (our own output) well-formed, so labels are escaped
    circles = root.findall("svg:circle", NS)
    x_top, y_top = 100.0, 200.0  # nice ceilings of the largest P90s (60 days, 200)
    plot_w, plot_h = WIDTH - MARGIN_LEFT - MARGIN_RIGHT, HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    assert float(circles[0].get("cx", "")) == round(MARGIN_LEFT + plot_w * 50 / x_top, 1)
    assert float(circles[1].get("cy", "")) == round(MARGIN_TOP + plot_h * (1 - 180 / y_top), 1)
    assert "A100 &lt;cheap&gt;" in svg


def test_stacked_bars_segments_add_up_to_the_total() -> None:
    svg = stacked_bars(["run 1"], [("compute", [6.0]), ("bubble", [2.0])], "s")
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="\d+" width="([\d.]+)"', svg)]
    assert widths[0] == 3 * widths[1]  # 6 s against 2 s
    assert "8.00 s" in svg
