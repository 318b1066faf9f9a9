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


# --- Labels that neither collide nor leave the chart ------------------------------------------

#: A text's width at 11 px in DejaVu Sans, about 0.6 em a character: estimated here on its own,
#: not with the module's (more generous) estimate, so that the check does not assume it.
CHAR_PX = 6.6


def _viewbox(root: ET.Element) -> tuple[float, float]:
    _, _, width, height = (float(v) for v in root.get("viewBox", "").split())
    return width, height


def _text_boxes(root: ET.Element, kind: str | None = None) -> list[tuple[float, ...]]:
    """(left, top, right, bottom) of each text (of class ``kind``), from its anchor."""
    boxes: list[tuple[float, ...]] = []
    for text in root.iter(f"{{{NS['svg']}}}text"):
        if kind is not None and text.get("class") != kind:
            continue
        width = len(text.text or "") * CHAR_PX
        x, y = float(text.get("x", "0")), float(text.get("y", "0"))
        anchor = text.get("text-anchor", "start")
        left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
        boxes.append((left, y - 10, left + width, y + 3))
    return boxes


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _inside(box: tuple[float, ...], width: float, height: float) -> bool:
    return box[0] >= 0 and box[1] >= 0 and box[2] <= width and box[3] <= height


def test_the_labels_of_close_points_do_not_overlap() -> None:
    points = [
        CostPoint("H100 on 64 GPUs, list price", Spread(9, 10, 11), Spread(90, 100, 110)),
        CostPoint("H100 on 64 GPUs, spot price", Spread(9, 10.2, 11), Spread(90, 100.5, 110)),
        CostPoint("H100 on 64 GPUs, 1-year reserved", Spread(9, 10.1, 11), Spread(90, 99, 110)),
    ]
    root = ET.fromstring(cost_versus_days(points, "USD"))  # noqa: S314 (our own output)
    labels = _text_boxes(root, "point-label")
    assert len(labels) == len(points)
    dots = [
        (float(c.get("cx", "")) - 5, float(c.get("cy", "")) - 5,
         float(c.get("cx", "")) + 5, float(c.get("cy", "")) + 5)
        for c in root.findall("svg:circle", NS)
    ]  # fmt: skip
    for index, box in enumerate(labels):
        assert _inside(box, *_viewbox(root)), box
        assert not any(_overlap(box, other) for other in labels[index + 1 :])
        assert not any(_overlap(box, dot) for dot in dots)


def test_a_long_point_label_is_cut_short_inside_the_chart() -> None:
    name = "Llama 3 70B on 1024 H100 at the committed three-year contract price"
    point = CostPoint(name, Spread(90, 98, 99), Spread(90, 98, 99))  # at the top right corner
    root = ET.fromstring(cost_versus_days([point], "USD"))  # noqa: S314 (our own output)
    [label] = root.findall("svg:text[@class='point-label']", NS)
    assert (label.text or "").endswith("…")
    assert name.startswith((label.text or "")[:-1])
    assert _inside(_text_boxes(root, "point-label")[0], *_viewbox(root))


def test_the_legend_wraps_inside_the_chart_width() -> None:
    names = [f"{part} (long explanatory name)" for part in
             ("compute", "pipeline bubble", "exposed communication", "data loading",
              "framework overhead", "network jitter", "recomputation")]  # fmt: skip
    labels = ["A scenario whose name is much longer than any bar label should be", "short"]
    series = [(name, [1.0 + i, 2.0]) for i, name in enumerate(names)]
    root = ET.fromstring(stacked_bars(labels, series, "s"))  # noqa: S314 (our own output)
    width, height = _viewbox(root)
    legend = _text_boxes(root, "legend")
    assert len(legend) == len(names)
    assert len({box[1] for box in legend}) > 1  # wrapped onto more than one row
    for box in _text_boxes(root):
        assert _inside(box, width, height), box
    for index, box in enumerate(legend):
        assert not any(_overlap(box, other) for other in legend[index + 1 :])
