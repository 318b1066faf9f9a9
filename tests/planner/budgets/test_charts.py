"""Server-side SVG charts of the sign-off pack: positions follow the data, text is escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from planner.budgets.charts import (
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
    tornado_svg,
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


# --- Tornado ---------------------------------------------------------------------------------


def _tornado_input(key: str, label: str, cost: tuple[float, float], days: tuple[float, float],
                   values: tuple[float, float] = (0.8, 1.25), unit: str = "x") -> dict:  # fmt: skip
    return {
        "key": key, "label": label, "unit": unit, "low_value": values[0], "central_value": 1.0,
        "high_value": values[1], "cost": list(cost), "training_days": list(days),
        "swing_cost": abs(cost[1] - cost[0]), "swing_days": abs(days[1] - days[0]),
    }  # fmt: skip


#: A sensitivity() result: baseline 1,000,000 USD over 40 days.
TORNADO: dict[str, Any] = {
    "baseline": {"training_days": 40.0, "gpu_hours": 400_000.0, "cost": 1_000_000.0},
    "inputs": [
        _tornado_input("efficiency", "Achieved <efficiency>", (1_300_000, 760_000), (52, 30.4)),
        _tornado_input("price", "Price per GPU-hour", (900_000, 1_100_000), (40, 40),
                       (2.25, 2.75), "per GPU-hour"),
        _tornado_input("restart_s", "Restart time", (990_000, 1_020_000), (39.6, 40.8),
                       (300, 1200), "s"),
        _tornado_input("utilisation", "Cluster utilisation", (1_000_000, 1_000_000), (40, 40),
                       (1.0, 1.0), "share"),
    ],
}  # fmt: skip


def _bars(root: ET.Element, side: str) -> list[tuple[float, float]]:
    """(left, right) of each bar of one side, top row first."""
    rects = root.findall(f"svg:rect[@class='bar-{side}']", NS)
    return [
        (float(r.get("x", "")), float(r.get("x", "")) + float(r.get("width", ""))) for r in rects
    ]


def _baseline_x(root: ET.Element) -> float:
    [line] = root.findall("svg:line[@class='baseline']", NS)
    assert line.get("x1") == line.get("x2")
    return float(line.get("x1", ""))


@pytest.mark.parametrize(("metric", "field"), [("cost", "cost"), ("days", "training_days")])
def test_tornado_bars_are_proportional_to_the_swings(metric: str, field: str) -> None:
    root = ET.fromstring(tornado_svg(TORNADO, metric=metric))  # noqa: S314 (our own output)
    centre = _baseline_x(root)
    baseline = TORNADO["baseline"][field]
    # Rows sorted by this metric's swing: the price moves no day, so it drops to the end.
    order = ["efficiency", "price", "restart_s", "utilisation"]
    if metric == "days":
        order = ["efficiency", "restart_s", "price", "utilisation"]
    rows = {item["key"]: item for item in TORNADO["inputs"]}
    labels = [t.text for t in root.findall("svg:text[@class='input-label']", NS)]
    assert labels == [rows[key]["label"] for key in order]
    scale = []
    for side, at in (("low", 0), ("high", 1)):
        bars = _bars(root, side)
        assert len(bars) == len(order)
        for (left, right), key in zip(bars, order, strict=True):
            value = rows[key][field][at]
            # One end on the baseline, the other on the value's side of it.
            assert (left if value >= baseline else right) == pytest.approx(centre, abs=0.11)
            if value != baseline:
                scale.append((right - left) / abs(value - baseline))
            else:
                assert right - left == pytest.approx(0, abs=0.11)
    assert max(scale) == pytest.approx(min(scale), rel=0.01)  # one px per unit everywhere
    assert len(scale) >= 4


def test_tornado_writes_each_inputs_value_beyond_its_bar_end_inside_the_chart() -> None:
    svg = tornado_svg(TORNADO, currency="EUR")
    root = ET.fromstring(svg)  # noqa: S314 (our own output)
    ends = [t.text for t in root.findall("svg:text[@class='end-value']", NS)]
    # efficiency's low value raises the cost: written on the right of its bar.
    assert ends[:2] == ["0.80×", "1.25×"]  # noqa: RUF001 (the multiplication sign)
    assert {"2.25 EUR/GPU-h", "2.75 EUR/GPU-h", "300 s", "1,200 s"} <= set(ends)
    assert "100 %" in ends  # utilisation fixed at one value: one text, no bar
    assert "Achieved &lt;efficiency&gt;" in svg
    width, height = _viewbox(root)
    boxes = _text_boxes(root)
    for box in boxes:
        assert _inside(box, width, height), box
    for index, box in enumerate(boxes):
        assert not any(_overlap(box, other) for other in boxes[index + 1 :]), box
    [efficiency_high] = [t for t in root.findall("svg:text[@class='end-value']", NS)
                         if t.text == "0.80×"]  # fmt: skip  # noqa: RUF001
    right = max(r for _, r in _bars(root, "low"))
    assert float(efficiency_high.get("x", "")) > right
    assert efficiency_high.get("text-anchor") == "start"


def test_tornado_days_chart_says_the_price_has_no_effect() -> None:
    root = ET.fromstring(tornado_svg(TORNADO, metric="days"))  # noqa: S314 (our own output)
    assert "no effect" in [t.text for t in root.findall("svg:text[@class='end-value']", NS)]
    assert "40.0 days" in (root.find("svg:text[@class='baseline-label']", NS).text or "")  # type: ignore[union-attr]


def test_tornado_refuses_an_unknown_metric() -> None:
    with pytest.raises(ValueError, match="metric"):
        tornado_svg(TORNADO, metric="gpu_hours")


def _circles(root: ET.Element) -> list[tuple[float, float]]:
    return [
        (float(c.get("cx", "")), float(c.get("cy", ""))) for c in root.findall("svg:circle", NS)
    ]


def test_the_axes_are_scaled_to_the_chosen_run_and_a_far_alternative_is_noted() -> None:
    chosen = CostPoint("Llama 3 8B on 64 H100", Spread(20, 25, 30), Spread(80e3, 100e3, 120e3))
    near = CostPoint("Llama 3 8B on 64 A100", Spread(40, 50, 70), Spread(150e3, 180e3, 260e3))
    far = CostPoint(
        "Llama 3.1 405B on 64 H100", Spread(900, 1_200, 1_500), Spread(20e6, 25e6, 31e6)
    )
    svg = cost_versus_days([chosen, near, far], "USD")
    root = ET.fromstring(svg)  # noqa: S314 (our own output)
    circles = _circles(root)
    assert len(circles) == 2  # the 405B run is not drawn
    # The axes end at the nice ceilings of the drawn P90s (70 days, 260 k USD), which are
    # within three times the chosen run's P90 (90 days, 360 k USD).
    x_top, y_top = 100.0, 500_000.0
    plot_w, plot_h = WIDTH - MARGIN_LEFT - MARGIN_RIGHT, HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    assert circles[0][0] == round(MARGIN_LEFT + plot_w * 25 / x_top, 1)
    assert circles[0][1] == round(MARGIN_TOP + plot_h * (1 - 100e3 / y_top), 1)
    # The chosen run is a quarter of the way along, not a dot at the origin.
    assert circles[0][0] - MARGIN_LEFT > plot_w / 5
    note = [text.text or "" for text in root.findall("svg:text[@class='off-chart']", NS)]
    assert note[0].startswith("Off the chart (beyond 3 times the chosen run's P90)")
    assert note[1] == "Llama 3.1 405B on 64 H100: 1,200 days, 25M USD"
    width, height = _viewbox(root)
    assert height > HEIGHT
    for box in _text_boxes(root, "off-chart"):
        assert _inside(box, width, height), box


def test_a_bar_reaching_past_the_focus_is_cut_at_the_axis_end() -> None:
    chosen = CostPoint("chosen", Spread(9, 10, 11), Spread(90, 100, 110))
    wide = CostPoint("uncertain", Spread(10, 30, 200), Spread(100, 150, 900))
    root = ET.fromstring(cost_versus_days([chosen, wide], "USD"))  # noqa: S314 (our own output)
    assert len(_circles(root)) == 2  # its P50s are within 3 x the chosen P90s: drawn
    right = max(float(line.get("x2", "0")) for line in root.findall("svg:line", NS))
    assert right <= WIDTH - MARGIN_RIGHT
    assert root.findall("svg:text[@class='off-chart']", NS) == []


def test_runs_close_to_the_chosen_one_leave_nothing_off_the_chart() -> None:
    points = [
        CostPoint("A", Spread(40, 50, 60), Spread(80, 100, 130)),
        CostPoint("B", Spread(20, 25, 30), Spread(150, 180, 200)),
    ]
    root = ET.fromstring(cost_versus_days(points, "USD"))  # noqa: S314 (our own output)
    assert len(_circles(root)) == 2
    assert _viewbox(root)[1] == HEIGHT
